-- KEYS[1] a day's counter, KEYS[2] its shares hash; ARGV floor (includes/restore-credits.lua),
-- expiry ms, credits (negative: given back), then share fields and their credits in pairs.
-- Returns the total as a string.

--- @include "includes/restore-credits"
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
for i = 4, #ARGV, 2 do redis.call('HINCRBYFLOAT', KEYS[2], ARGV[i], ARGV[i + 1]) end
if #ARGV >= 4 then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return total
