-- A bootstrap page. KEYS: 1 journal, 2 state, 3 the run's shards. ARGV: 1 the index's prefix, 2
-- run, 3 shard ('' while more pages follow), 4 the page's slot P, 5 the slot its
-- owners were read at Q, 6 now (ms), then five per member: parent key, account, reverse, label, owner ('' when
-- the name account is missing). Each member is written at P unless the stream wrote it at a later
-- slot (then only its unknown facts are filled); the journal's later facts win over the page's. A
-- shard given is marked done; the last one completes the build (status `complete`, the journal
-- deleted) and sets its floor, the lowest slot its pages were read at (`minSlot`): members older
-- than it were in no page, and read as gone (includes/registry-member.lua). Returns `{written,
-- done}`, or `{-1, 0}` when `run` is not the current build.

--- @include "includes/registry-member"
local state = redis.call('HMGET', KEYS[2], 'run', 'status', 'shards')
if state[1] ~= ARGV[2] or state[2] ~= 'building' then return { -1, 0 } end
local P_slot, Q_slot = tonumber(ARGV[4]), tonumber(ARGV[5])
local low = tonumber(redis.call('HGET', KEYS[2], 'minSlot'))
if not low or P_slot < low then
  low = P_slot
  redis.call('HSET', KEYS[2], 'minSlot', ARGV[4])
end
local written = 0
for i = 7, #ARGV, 5 do
  local pk, acct, rev, label, owner = ARGV[i], ARGV[i + 1], ARGV[i + 2], '+' .. ARGV[i + 3], ARGV[i + 4]
  if owner == '' then owner = '-' end
  local ja = redis.call('HGET', KEYS[1], acct)
  local jr = redis.call('HGET', KEYS[1], rev)
  local jas = jslot(ja)
  -- A journal fact that wins is the member's newest: its slot, so nothing older undoes it.
  local top = P_slot
  if ja and string.match(ja, '^%d+|del$') and jas > P_slot then
    owner = '-'
    top = math.max(top, jas)
  end
  local jp, jo = string.match(ja or '', '^%d+|([^|]+)|(.+)$')
  -- A transfer after the page's read is a fact at its slot: the owners' read (Q) holds it when
  -- not later, the journal's owner wins when later.
  if jp == pk and jas > P_slot then
    if jas > Q_slot then owner = jo end
    top = math.max(top, jas)
  end
  if jr and string.match(jr, '^%d+|del$') and jslot(jr) > P_slot then
    label = '-'
    top = math.max(top, jslot(jr))
  end
  local m = parse(redis.call('HGET', pkey(pk), acct))
  if m and m.slot > P_slot then
    if m.owner == '' then m.owner = owner end
    if m.label == '' then m.label = label end
    if top > m.slot then m.slot = top end
  else
    m = { slot = top, owner = owner, label = label }
  end
  redis.call('HSET', pkey(pk), acct, encode(m))
  index_member(pk, acct, rev)
  written = written + 1
end
local done = redis.call('HLEN', KEYS[3])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
  done = redis.call('HLEN', KEYS[3])
  if done >= tonumber(state[3]) then
    redis.call('HSET', KEYS[2], 'status', 'complete', 'completedAt', ARGV[6],
      'floor', string.format('%.0f', low))
    redis.call('DEL', KEYS[1])
  end
end
return { written, done }
