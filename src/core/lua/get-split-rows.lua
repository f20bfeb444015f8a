-- Reads some labels' members of an entry: KEYS M L H. ARGV: pairs `label, wanted` (distinct
-- labels). Returns nil without an entry, else `{head, n, account, value, ..., n, ...}`: for each
-- label, its first `wanted` members in account order (`n` of them, each with its value in H, nil
-- when absent), or n = -1 when they could not all be told apart within a bounded read.
--
-- A label's members are `label .. "\0" .. account` in L, after every shorter label it extends: the
-- range `[label\0, label\1)` holds them and the members of labels that go on with a NUL (`a\0b`),
-- which are told apart by the NUL left in the rest (accounts are base58). So that a parent full of
-- such labels cannot make one read walk them all, at most `wanted + 8` are read per label.

local head = redis.call('GET', KEYS[1])
if not head then return nil end
local out = { head }
for i = 1, #ARGV, 2 do
  local label, wanted = ARGV[i], tonumber(ARGV[i + 1])
  local at = #label + 2
  local cap = wanted + 8
  local raw = redis.call('ZRANGEBYLEX', KEYS[2], '[' .. label .. '\0', '(' .. label .. '\1',
    'LIMIT', 0, cap)
  local accounts = {}
  for _, m in ipairs(raw) do
    if #accounts == wanted then break end
    local account = string.sub(m, at)
    if not string.find(account, '\0', 1, true) then accounts[#accounts + 1] = account end
  end
  if #accounts < wanted and #raw == cap then
    out[#out + 1] = -1
  else
    out[#out + 1] = #accounts
    if #accounts > 0 then
      local values = redis.call('HMGET', KEYS[3], unpack(accounts))
      for j = 1, #accounts do
        out[#out + 1] = accounts[j]
        out[#out + 1] = values[j]
      end
    end
  end
end
return out
