-- Reads a run of an entry's members in the labels' order: KEYS M L H. ARGV: 1 the first index in
-- L, 2 how many. Returns nil without an entry, else `{head, member, ..., value, ...}`: the members
-- of L from that index (`label .. "\0" .. account`) and their values in H (nil when absent). A
-- large entry is read so, a run at a time, with its head each time to tell a change between runs.

local head = redis.call('GET', KEYS[1])
if not head then return nil end
local from = tonumber(ARGV[1])
local members = redis.call('ZRANGE', KEYS[2], from, from + tonumber(ARGV[2]) - 1)
local out = { head }
if #members == 0 then return out end
local accounts = {}
for j, m in ipairs(members) do
  -- The account follows the last NUL (a label may hold one; an account never does).
  local at = 0
  while true do
    local next_at = string.find(m, '\0', at + 1, true)
    if not next_at then break end
    at = next_at
  end
  accounts[j] = string.sub(m, at + 1)
  out[j + 1] = m
end
local values = redis.call('HMGET', KEYS[3], unpack(accounts))
local n = #members
for j = 1, n do out[n + j + 1] = values[j] end
return out
