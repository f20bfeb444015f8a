-- Starts build `run + 1` unless one is under way (or complete, when `force` is not set). KEYS: 1
-- state. ARGV: 1 shards, 2 now (ms), 3 force ('1' or ''). Returns the run under way or started,
-- and whether it was started now. The last build's floor stays until this one completes.

local s = redis.call('HMGET', KEYS[1], 'run', 'status')
local run = tonumber(s[1]) or 0
if s[2] == 'building' or (s[2] == 'complete' and ARGV[3] ~= '1') then return { run, 0 } end
run = run + 1
redis.call('HSET', KEYS[1], 'run', run, 'status', 'building', 'shards', ARGV[1],
  'startedAt', ARGV[2], 'completedAt', 0)
redis.call('HDEL', KEYS[1], 'minSlot')
return { run, 1 }
