-- One chunk of a large scan's write, before put-split-entry.lua takes it in. KEYS: 1 the staged
-- labels (a sorted set as L), 2 the staged members (a hash as H), 3 I the member-parents index.
-- ARGV: 1 parent, 2 expiry of the staged keys (ms), 3 the members' slot, 4 the members, packed as
-- read_members (includes/split-entry.lua) reads them. Writes the members and labels to the staged
-- keys and their index fields to I (for accounts of this parent they name this parent whichever
-- write wins; put-split-entry.lua drops those of accounts it refuses to list). Returns how many
-- members the staged hash holds.

--- @include "includes/split-entry"
local hs, zs, is = read_members(ARGV[4], ARGV[3], ARGV[1], nil)
chunked('HSET', KEYS[2], hs)
chunked('ZADD', KEYS[1], zs)
chunked('HSET', KEYS[3], is)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return redis.call('HLEN', KEYS[2])
