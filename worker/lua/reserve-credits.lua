-- KEYS[1] today's counter; ARGV budget, credits, expiry ms. Adds unless past the budget; returns
-- {1|0, total}, total as a string (a float reply would be truncated).

local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
if spent + tonumber(ARGV[2]) > tonumber(ARGV[1]) + 1e-9 then return {0, tostring(spent)} end
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, total}
