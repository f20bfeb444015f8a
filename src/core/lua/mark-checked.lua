-- An existence check's write. KEYS: M L H I. ARGV: 1 fetchedAt (ms), 2 the slot the check read at
-- ('null' unknown), 3 the follow epoch (ms: since when the stream missed no change), 4 parent,
-- then the accounts found gone. Drops each of them unless its member's slot is past the check's
-- (added after what the check saw); raises the slot to the check's, and fetchedAt to it only for
-- an entry known whole since the epoch that owes no re-read: a check proves what is gone, not what
-- was added, so an entry fetched before the epoch (a name created in a gap the stream could not
-- heal may be missing) stays as old as its scan. Bumps the revision. Returns
-- `{outcome, rev, dropped}`, 'missing' without an entry.

--- @include "includes/split-entry"
local m = meta_of(redis.call('GET', KEYS[1]))
if not m then return { 'missing', 0, 0 } end
local at = tonumber(ARGV[1])
local slot = arg_slot(ARGV[2])
local epoch = tonumber(ARGV[3])
if slot == false or not is_slot(at) or not is_slot(epoch) then
  return redis.error_reply('ERR check slot, fetchedAt or epoch is not a safe integer')
end
local parent = ARGV[4]
local dropped = 0
for i = 5, #ARGV do
  local acct = ARGV[i]
  local old = member_of(redis.call('HGET', KEYS[3], acct))
  if old and not (slot and is_slot(old[3]) and old[3] > slot) then
    redis.call('HDEL', KEYS[3], acct)
    if type(old[1]) == 'string' then redis.call('ZREM', KEYS[2], old[1] .. '\0' .. acct) end
    forget_index(KEYS[4], parent, acct, nil)
    m.count = m.count - 1
    dropped = dropped + 1
  end
end
if not m.owes and m.fetchedAt and m.fetchedAt >= epoch and at > m.fetchedAt then
  m.fetchedAt = at
end
if slot and (not m.slot or slot > m.slot) then m.slot = slot end
m.rev = m.rev + 1
redis.call('SET', KEYS[1], encode_meta(m), 'KEEPTTL')
return { 'written', m.rev, dropped }
