-- KEYS[1] a day's counter, KEYS[2] its shares hash; ARGV floor (includes/restore-credits.lua),
-- expiry ms, credits (negative: given back), then share fields, each with its credits and its
-- floor (includes/restore-share.lua). Returns {the total, the fields' new totals joined by
-- spaces}, as strings.

--- @include "includes/restore-credits"
--- @include "includes/restore-share"
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local totals = {}
for i = 4, #ARGV, 3 do
  restoreShare(ARGV[i], ARGV[i + 2], ARGV[2])
  totals[#totals + 1] = redis.call('HINCRBYFLOAT', KEYS[2], ARGV[i], ARGV[i + 1])
end
if #ARGV >= 4 then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return {total, table.concat(totals, ' ')}
