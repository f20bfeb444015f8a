-- Reads the members of a page of labels of an entry: KEYS M L H. ARGV: 1 the page's first label,
-- 2 its last, 3 how many members (rows) the page holds, 4.. the page's distinct labels, each
-- followed by how many of its members the page takes. Returns nil without an entry, else
-- `{head, 0, member, ..., value, ...}` with the range's first members (their values in H, nil when
-- absent), or, when the range holds other labels (Redis orders labels by UTF-8 bytes, answers by
-- UTF-16 code units) or too few members, `{head, 1, n, member, value, ..., n, ...}`: for each label
-- its first members in account order, n = -1 when they could not all be told apart.
--
-- A label's members are `label .. "\0" .. account` in L, after every shorter label it extends: the
-- range `[label\0, label\1)` holds them and the members of labels that go on with a NUL (`a\0b`),
-- told apart by the NUL left in the rest (accounts are base58). So that a parent full of such labels
-- cannot make one read walk them all, at most `wanted + 8` are read per label.

local head = redis.call('GET', KEYS[1])
if not head then return nil end
local count = tonumber(ARGV[3])

-- The page's labels in the order Redis keeps them, if that is the answers' order.
local members = redis.call('ZRANGEBYLEX', KEYS[2], '[' .. ARGV[1] .. '\0', '(' .. ARGV[2] .. '\1',
  'LIMIT', 0, count)
local same = #members == count
local accounts = {}
local at = 1
for i = 4, #ARGV, 2 do
  if not same then break end
  local label, wanted = ARGV[i], tonumber(ARGV[i + 1])
  local prefix = label .. '\0'
  for j = at, at + wanted - 1 do
    local m = members[j]
    if string.sub(m, 1, #prefix) ~= prefix or string.find(m, '\0', #prefix + 1, true) then
      same = false
      break
    end
    accounts[j] = string.sub(m, #prefix + 1)
  end
  at = at + wanted
end
if same then
  local values = redis.call('HMGET', KEYS[3], unpack(accounts))
  local out = { head, 0 }
  for j = 1, count do out[j + 2] = accounts[j] end
  for j = 1, count do out[count + j + 2] = values[j] end
  return out
end

local out = { head, 1 }
for i = 4, #ARGV, 2 do
  local label, wanted = ARGV[i], tonumber(ARGV[i + 1])
  local from = #label + 2
  local cap = wanted + 8
  local raw = redis.call('ZRANGEBYLEX', KEYS[2], '[' .. label .. '\0', '(' .. label .. '\1',
    'LIMIT', 0, cap)
  local accounts = {}
  for _, m in ipairs(raw) do
    if #accounts == wanted then break end
    local account = string.sub(m, from)
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
