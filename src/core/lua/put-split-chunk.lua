-- One chunk of a large scan's write, before put-split-entry.lua takes it in. KEYS: 1 the staged
-- labels (a sorted set as L), 2 the staged members (a hash as H), 3 I the member-parents index.
-- ARGV: 1 parent, 2 expiry of the staged keys (ms), 3.. members as put-split-entry.lua takes
-- them (`account reverse [label,owner,slot]\nlabel`). Writes the members and labels to the staged
-- keys and their index fields to I (for accounts of this parent they name this parent whichever
-- write wins; put-split-entry.lua drops those of accounts it refuses to list). Returns how many
-- members the staged hash holds.

--- @include "includes/split-entry"
local parent = ARGV[1]
local hs, zs, is = {}, {}, {}
local h, z, x = 0, 0, 0
for i = 3, #ARGV do
  local acct, reverse, value, label = string.match(ARGV[i], '^(%S+) (%S+) ([^\n]*)\n(.*)$')
  local named = parent .. ' ' .. acct
  hs[h + 1] = acct; hs[h + 2] = value; h = h + 2
  zs[z + 1] = 0; zs[z + 2] = label .. '\0' .. acct; z = z + 2
  is[x + 1] = acct; is[x + 2] = named .. ' ' .. reverse
  is[x + 3] = reverse; is[x + 4] = named; x = x + 4
end
chunked('HSET', KEYS[2], hs)
chunked('ZADD', KEYS[1], zs)
chunked('HSET', KEYS[3], is)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return redis.call('HLEN', KEYS[2])
