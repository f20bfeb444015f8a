-- A re-read the stream owes and cannot make (the day's budget spent), or asked during a heal
-- (which vouches before the re-read lands). KEYS: M. ARGV: 1 the slot
-- the re-read must reach. Raises the head's `owes` to it (a scan that far clears it,
-- put-split-entry.lua): until then the stream does not vouch for the entry, which is served by its
-- window alone. Bumps the revision. Returns `{outcome, rev}`, 'missing' without an entry.

--- @include "includes/split-entry"
local m = meta_of(redis.call('GET', KEYS[1]))
if not m then return { 'missing', 0 } end
local owes = tonumber(ARGV[1])
if not is_slot(owes) then return redis.error_reply('ERR owed slot is not a safe integer') end
if not m.owes or owes > m.owes then m.owes = owes end
m.rev = m.rev + 1
redis.call('SET', KEYS[1], encode_meta(m), 'KEEPTTL')
return { 'written', m.rev }
