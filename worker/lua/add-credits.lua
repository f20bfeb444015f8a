-- KEYS[1] a day's counter; ARGV floor (includes/restore-credits.lua), expiry ms, credits
-- (negative: given back). Returns the total as a string.

--- @include "includes/restore-credits"
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return total
