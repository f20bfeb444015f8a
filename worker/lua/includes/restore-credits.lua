-- Puts back a day's counter Redis lost (KEYS[1] missing while this process knew a spend, ARGV[1],
-- the floor): a restart of a Redis without persistence must not grant a fresh budget. The counter
-- is never missing otherwise within its day (it outlives the day, and given-back reservations
-- leave 0). ARGV[2]: the counter's expiry (ms).

local floor = tonumber(ARGV[1])
if floor > 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
