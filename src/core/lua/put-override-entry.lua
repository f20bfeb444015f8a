-- Writes an override's entry unless the stored one is newer (`next_rev`), and keeps every override
-- entry within one budget of bytes. KEYS[1] the entry's key, KEYS[2] the index (a sorted set of override entry keys
-- by expiry time), KEYS[3] their sizes (a hash), KEYS[4] the sum of those sizes. ARGV: the new
-- entry's slot, its fetchedAt, the rest of its JSON, the expiry in milliseconds, the time now in
-- Unix milliseconds, the budget in bytes. Entries past their expiry leave the index first; then,
-- while the sum is over the budget, the entry closest to its expiry is deleted. Every key it
-- touches shares the prefix, which is a hash tag on Redis Cluster, so they live in one slot.
-- Returns the new revision, or 0 when it kept the stored entry.

--- @include "includes/override-entry"
local refused = bad_args(ARGV[1], ARGV[2])
if refused then return refused end
local rev = next_rev(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), nil)
if not rev then return 0 end
local now = tonumber(ARGV[5])
local function forget(key)
  local size = tonumber(redis.call('HGET', KEYS[3], key) or '0')
  redis.call('HDEL', KEYS[3], key)
  redis.call('ZREM', KEYS[2], key)
  return redis.call('DECRBY', KEYS[4], size)
end
for _, key in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do forget(key) end
forget(KEYS[1])
local value = entry(ARGV[1], rev, ARGV[2], ARGV[3])
local size = #value + #KEYS[1]
redis.call('SET', KEYS[1], value, 'PX', ARGV[4])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), KEYS[1])
redis.call('HSET', KEYS[3], KEYS[1], size)
local total = redis.call('INCRBY', KEYS[4], size)
while total > tonumber(ARGV[6]) do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not oldest or oldest == KEYS[1] then break end
  redis.call('DEL', oldest)
  total = forget(oldest)
end
return rev
