-- KEYS[1] today's counter; ARGV floor (includes/restore-credits.lua), expiry ms, budget, credits.
-- Adds unless past the budget; returns {1|0, total}, total as a string (a float reply would be
-- truncated).

--- @include "includes/restore-credits"
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
if spent + tonumber(ARGV[4]) > tonumber(ARGV[3]) + 1e-9 then return {0, tostring(spent)} end
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, total}
