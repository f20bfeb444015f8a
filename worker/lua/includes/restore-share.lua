-- Puts back a share field of a day's shares hash (KEYS[2]) Redis lost: a field this process saw
-- at `floor` credits that is missing now. Within its day a field is never missing otherwise (it
-- expires with the counter, and given-back reservations leave 0), so a missing one is lost data,
-- and a lost field must not let its account spend its share again. `ttl`: the hash's expiry (ms).

local function restoreShare(field, floor, ttl)
  if tonumber(floor) > 0 and redis.call('HEXISTS', KEYS[2], field) == 0 then
    redis.call('HSET', KEYS[2], field, floor)
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
