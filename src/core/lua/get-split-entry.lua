-- Reads an entry: KEYS M L; ARGV (optional): 1 the first index in L, 2 how many. Returns nil
-- without one, else `{head, labels...}` (sorted-set order): all of them, or that run of them (a
-- large entry is read a run at a time, the head telling whether it changed between runs).

local head = redis.call('GET', KEYS[1])
if not head then return nil end
local from, stop = 0, -1
if ARGV[1] then
  from = tonumber(ARGV[1])
  stop = from + tonumber(ARGV[2]) - 1
end
local out = redis.call('ZRANGE', KEYS[2], from, stop)
table.insert(out, 1, head)
return out
