-- Adds the pairs of one flush to a window's counts. KEYS[1]: the sorted set of distinct clients
-- per parent; KEYS[2]: the hash of the clients counted per parent in that window (across every API
-- process), space-separated. ARGV: the expiry of both (ms), the most parents kept, the most clients
-- counted per parent, then a parent and a client, repeated. A client counts once per parent and
-- window whichever process saw it, up to the cap. A new parent, when the table is full, replaces
-- one with the fewest clients (and its clients), so parents one client each asks for only ever
-- displace each other, never a parent with more.

local ttl, maxParents, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 4, #ARGV, 2 do
  local parent, client = ARGV[i], ARGV[i + 1]
  local clients = redis.call('HGET', KEYS[2], parent)
  if not clients then
    if redis.call('ZCARD', KEYS[1]) >= maxParents then
      local fewest = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
      if fewest then
        redis.call('ZREM', KEYS[1], fewest)
        redis.call('HDEL', KEYS[2], fewest)
      end
    end
    redis.call('HSET', KEYS[2], parent, client)
    redis.call('ZADD', KEYS[1], 1, parent)
  elseif not string.find(' ' .. clients .. ' ', ' ' .. client .. ' ', 1, true) then
    local counted = tonumber(redis.call('ZSCORE', KEYS[1], parent) or '0')
    if counted < cap then
      redis.call('HSET', KEYS[2], parent, clients .. ' ' .. client)
      redis.call('ZINCRBY', KEYS[1], 1, parent)
    end
  end
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return 0
