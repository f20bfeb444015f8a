-- Reads an entry with its members: KEYS M L H. Returns nil without one, else `{head, 'm', account,
-- value, ...}` when it keeps its members, `{head, 'l', label-members...}` when it was written
-- without them.

local head = redis.call('GET', KEYS[1])
if not head then return nil end
local out
if string.find(head, '"members":true', 1, true) then
  out = redis.call('HGETALL', KEYS[3])
  table.insert(out, 1, 'm')
else
  out = redis.call('ZRANGE', KEYS[2], 0, -1)
  table.insert(out, 1, 'l')
end
table.insert(out, 1, head)
return out
