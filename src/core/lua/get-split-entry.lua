-- Reads an entry: KEYS M L. Returns nil without one, else `{head, labels...}` (sorted-set order).

local head = redis.call('GET', KEYS[1])
if not head then return nil end
local out = redis.call('ZRANGE', KEYS[2], 0, -1)
table.insert(out, 1, head)
return out
