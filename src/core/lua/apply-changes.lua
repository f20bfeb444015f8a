-- Changes to some members. KEYS: M L H I. ARGV: 1 slot, 2 parent, 3 index expiry (ms), 4 ceiling
-- ('' unknown), then five arguments per change: account, reverse record, 'u' (upsert) or 'r'
-- (remove), label, owner. An entry whose slot or scan slot is past the ceiling holds a slot no
-- chain has reached (an earlier release, a bad reply): no change is judged against it, 'unsound'
-- is returned and the caller re-reads (put-split-entry.lua lets that scan replace it). A
-- change at a slot below its member's stored slot, or of an account not listed at a slot below
-- the last scan's, is ignored (an older notification arrived late: the scan saw its outcome);
-- an upsert that changes nothing raises the member's slot only. When something changed: the
-- revision is bumped and the entry's slot raised to `slot`. Returns `{outcome, rev}`: 'missing'
-- without an entry, or with an unreadable head (nothing to patch: a scan writes it anew);
-- 'unsound' as above.

--- @include "includes/split-entry"
local m = meta_of(redis.call('GET', KEYS[1]))
if not m then return { 'missing', 0 } end
if not m.sound then return { 'missing', m.rev } end
local slot = arg_slot(ARGV[1])
if not slot then return redis.error_reply('ERR change slot is not a safe integer') end
local parent = ARGV[2]
local ceiling = tonumber(ARGV[4])
if ceiling and ((m.slot and m.slot > ceiling) or (m.scanSlot and m.scanSlot > ceiling)) then
  return { 'unsound', m.rev }
end
local changed = false
for i = 5, #ARGV, 5 do
  local acct, reverse, op, label, owner = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local raw = redis.call('HGET', KEYS[3], acct)
  local old = member_of(raw)
  local older = old and is_slot(old[3]) and old[3] > slot
  -- Absent, and the change predates the last scan, which saw what became of it.
  if not old and m.scanSlot and slot < m.scanSlot then older = true end
  if not older then
    if op == 'u' then
      if old and old[1] == label and old[2] == owner then
        if old[3] ~= slot then redis.call('HSET', KEYS[3], acct, member_value(label, owner, slot)) end
      else
        if old and type(old[1]) == 'string' then
          redis.call('ZREM', KEYS[2], old[1] .. '\0' .. acct)
        elseif not old then
          m.count = m.count + 1
        end
        redis.call('HSET', KEYS[3], acct, member_value(label, owner, slot))
        redis.call('ZADD', KEYS[2], 0, label .. '\0' .. acct)
        index_member(KEYS[4], parent, acct, reverse)
        changed = true
      end
    elseif old then
      redis.call('HDEL', KEYS[3], acct)
      if type(old[1]) == 'string' then redis.call('ZREM', KEYS[2], old[1] .. '\0' .. acct) end
      forget_index(KEYS[4], parent, acct, reverse)
      m.count = m.count - 1
      changed = true
    end
  end
end
if not changed then return { 'unchanged', m.rev } end
m.rev = m.rev + 1
if not m.slot or slot > m.slot then m.slot = slot end
redis.call('SET', KEYS[1], encode_meta(m), 'KEEPTTL')
same_life(KEYS[1], { KEYS[2], KEYS[3] })
if redis.call('PTTL', KEYS[4]) == -1 then redis.call('PEXPIRE', KEYS[4], ARGV[3]) end
return { 'written', m.rev }
