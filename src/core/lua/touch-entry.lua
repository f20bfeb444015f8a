-- A use of an entry. KEYS: M L H I R. ARGV: 1 expiry (ms), 2 now (ms), 3 parent. When the entry
-- exists: its three keys live `expiry` from now, the parent's registry score is `now`, and the
-- index and registry live at least as long. Returns 1, or 0 without an entry.

if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
redis.call('ZADD', KEYS[5], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[5], ARGV[1])
redis.call('PEXPIRE', KEYS[4], ARGV[1])
return 1
