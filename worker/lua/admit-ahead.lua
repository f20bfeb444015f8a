-- Admits parents to the window's refreshes ahead: those refreshed ahead in this window already,
-- and new ones while fewer than the most parents were. KEYS[1]: the set of parents refreshed ahead
-- in the window. ARGV: its expiry (ms), the most parents (`HOT_KEYS_TOP_N`), then the parents
-- due. Returns the admitted ones. However the ranking turns within a window (clients asking for
-- other parents, two addresses rotating theirs), uncharged refreshes go to at most that many
-- parents per window.

local admitted = {}
local most = tonumber(ARGV[2])
for i = 3, #ARGV do
  if redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 1 or redis.call('SCARD', KEYS[1]) < most then
    redis.call('SADD', KEYS[1], ARGV[i])
    admitted[#admitted + 1] = ARGV[i]
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return admitted
