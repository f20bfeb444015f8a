-- A scan's write. KEYS (includes/split-entry.lua): M L H I R, then 6 and 7 the staged labels and
-- members of a large scan (put-split-chunk.lua; unused otherwise). ARGV: 1 slot ('null' unknown),
-- 2 fetchedAt, 3 scanSlot ('' none), 4 scannedAt ('' none), 5 expiry (ms), 6 ceiling ('' unknown),
-- 7 now (ms), 8 parent, 9 'm' (10 the members, packed as read_members reads them, each written
-- with the entry's slot, 0 when unknown) or 's' (the members were staged in chunks, their index
-- fields written). Refuses to take the entry back in time, as the
-- override entries' `next_rev` does (older slot; unknown slot: older fetchedAt; a stored entry
-- unsound or past the ceiling holds nothing back); a refused staged write drops its staged keys
-- and the index fields of the accounts the stored entry does not list. Keeps a re-read owed
-- (`owes`) unless this scan read that far. Replaces the members and labels, drops the index
-- fields of accounts no longer listed and writes those of the listed ones, and registers the
-- parent at `now`. Returns the new revision, 0 when it kept the stored entry.

--- @include "includes/split-entry"
local slot = arg_slot(ARGV[1])
local at = tonumber(ARGV[2])
if slot == false or not is_slot(at) then
  return redis.error_reply('ERR entry slot or fetchedAt is not a safe integer')
end
local ceiling = tonumber(ARGV[6])
local rev = 1
local c = meta_of(redis.call('GET', KEYS[1]))
if c then
  local held = c.sound and not (ceiling and c.slot and c.slot > ceiling)
  if held then
    local older
    if c.slot and slot and c.slot ~= slot then
      older = slot < c.slot
    else
      older = c.fetchedAt and at < c.fetchedAt
    end
    if older then
      if ARGV[9] == 's' then
        for _, acct in ipairs(redis.call('HKEYS', KEYS[7])) do
          if redis.call('HEXISTS', KEYS[3], acct) == 0 then forget_index(KEYS[4], ARGV[8], acct, nil) end
        end
        redis.call('DEL', KEYS[6], KEYS[7])
      end
      return 0
    end
  end
  rev = c.rev + 1
end
local parent = ARGV[8]
local listed = {}
local hs, zs, is, count = read_members(ARGV[10] or '', slot and n(slot) or '0', parent, listed)
if ARGV[9] == 's' then
  -- Staged: the index fields are written; what is left is the accounts no longer listed, and a
  -- rename of each staged key (none for an empty scan).
  for _, acct in ipairs(redis.call('HKEYS', KEYS[3])) do
    if redis.call('HEXISTS', KEYS[7], acct) == 0 then forget_index(KEYS[4], parent, acct, nil) end
  end
  redis.call('DEL', KEYS[2], KEYS[3])
  count = redis.call('HLEN', KEYS[7])
  if count > 0 then
    redis.call('RENAME', KEYS[7], KEYS[3])
    redis.call('RENAME', KEYS[6], KEYS[2])
  end
else
  for _, acct in ipairs(redis.call('HKEYS', KEYS[3])) do
    if not listed[acct] then forget_index(KEYS[4], parent, acct, nil) end
  end
  redis.call('DEL', KEYS[2], KEYS[3])
  chunked('HSET', KEYS[3], hs)
  chunked('ZADD', KEYS[2], zs)
  chunked('HSET', KEYS[4], is)
end
local ttl = ARGV[5]
-- A re-read the stream still owes (mark-owed.lua) is settled only by a scan that far.
local scan_slot = tonumber(ARGV[3])
local owes = c and c.owes
if owes and scan_slot and scan_slot >= owes then owes = nil end
redis.call('SET', KEYS[1], encode_meta({
  slot = slot, rev = rev, fetchedAt = at, scanSlot = scan_slot,
  scannedAt = tonumber(ARGV[4]), count = count, owes = owes,
}), 'PX', ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)
redis.call('ZADD', KEYS[5], ARGV[7], parent)
redis.call('PEXPIRE', KEYS[5], ttl)
redis.call('PEXPIRE', KEYS[4], ttl)
return rev
