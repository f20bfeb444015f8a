-- KEYS[1] today's counter, KEYS[2] today's shares hash (docs/design.md, "Budget"). ARGV: floor
-- (includes/restore-credits.lua), expiry ms, budget, credits, the account (`p` proactive, `c` a
-- client), the proactive, pool and reserve caps, whether the reserve may pay (`1`: a parent known
-- to exist), the proactive, pool and reserve floors (includes/restore-share.lua), then the
-- client's fields, each with its cap and its floor. Puts back the account's fields Redis lost,
-- then adds the credits to the counter and to the account's fields unless the day, one of the
-- client's own fields, or every pool it may use would go past its cap: a client pays from the
-- pool, then from the reserve. Returns {1, total, the fields charged joined by spaces (a client
-- key holds none), their new totals joined likewise} or {0, total, why: `budget`, `client` or
-- `proactive`}; totals as strings (a float reply would be truncated).

--- @include "includes/restore-credits"
--- @include "includes/restore-share"
local ttl = ARGV[2]
if ARGV[5] == 'p' then
  restoreShare('proactive', ARGV[10], ttl)
else
  restoreShare('pool', ARGV[11], ttl)
  restoreShare('reserve', ARGV[12], ttl)
  for i = 13, #ARGV, 3 do restoreShare(ARGV[i], ARGV[i + 2], ttl) end
end
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
local credits = tonumber(ARGV[4])
local eps = 1e-9
if spent + credits > tonumber(ARGV[3]) + eps then return {0, tostring(spent), 'budget'} end
local function used(field) return tonumber(redis.call('HGET', KEYS[2], field) or '0') end
local fields = {}
if ARGV[5] == 'p' then
  if used('proactive') + credits > tonumber(ARGV[6]) + eps then
    return {0, tostring(spent), 'proactive'}
  end
  fields[1] = 'proactive'
else
  for i = 13, #ARGV, 3 do
    if used(ARGV[i]) + credits > tonumber(ARGV[i + 1]) + eps then
      return {0, tostring(spent), 'client'}
    end
    fields[#fields + 1] = ARGV[i]
  end
  if used('pool') + credits <= tonumber(ARGV[7]) + eps then
    fields[#fields + 1] = 'pool'
  elseif ARGV[9] == '1' and used('reserve') + credits <= tonumber(ARGV[8]) + eps then
    fields[#fields + 1] = 'reserve'
  else
    return {0, tostring(spent), 'budget'}
  end
end
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[4])
local totals = {}
for i, field in ipairs(fields) do totals[i] = redis.call('HINCRBYFLOAT', KEYS[2], field, ARGV[4]) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return {1, total, table.concat(fields, ' '), table.concat(totals, ' ')}
