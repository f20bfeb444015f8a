-- Reads an entry with its members: KEYS M H. Returns nil without one, else `{head, account,
-- value, ...}`.

local head = redis.call('GET', KEYS[1])
if not head then return nil end
local out = redis.call('HGETALL', KEYS[2])
table.insert(out, 1, head)
return out
