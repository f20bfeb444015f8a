-- Removes parents idle since before a time. KEYS: R I. ARGV: 1 the time (ms), 2 most parents, 3
-- most members (the batch stops once it has dropped this many), 4..6 the prefixes of M, L and H
-- keys of the endpoint (the parent follows; same hash tag as KEYS, so one cluster slot). Drops each
-- parent's members' index fields, its keys and its registry entry. Returns `{removed, more}`
-- (more = 1 when the batch stopped at a bound).

--- @include "includes/split-entry"
local parents = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, ARGV[2])
local most = tonumber(ARGV[3])
local work, removed = 0, 0
for _, p in ipairs(parents) do
  local members = ARGV[6] .. p
  for _, acct in ipairs(redis.call('HKEYS', members)) do
    forget_index(KEYS[2], p, acct, nil)
    work = work + 1
  end
  redis.call('DEL', ARGV[4] .. p, ARGV[5] .. p, members)
  redis.call('ZREM', KEYS[1], p)
  removed = removed + 1
  if work >= most then break end
end
local more = 0
if removed < #parents or #parents >= tonumber(ARGV[2]) then more = 1 end
return { removed, more }
