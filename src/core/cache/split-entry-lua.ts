/**
 * The Lua scripts of the configured endpoint's entries in the split layout (docs/design.md, "The
 * subdomain cache"); src/core/cache/subdomain-cache.ts defines them as commands and is their only
 * caller. Per (endpoint, parent): `M` the head (a JSON string), `L` the labels (a sorted set,
 * score 0, member `label .. "\0" .. account`), `H` the members (a hash, account -> JSON
 * `[label, owner, slot]`); per endpoint: `I` the member-parents index (a hash: subdomain account ->
 * `parent account reverse`, reverse record -> `parent account`), `R` the followed parents (a sorted
 * set, parent -> last use in ms).
 *
 * Every script touches only the accounts it is given (a scan's put, which replaces them all, and
 * the sweep aside), so a change costs O(accounts touched · log n) whatever the parent's size.
 * Numbers are written with `%.0f` (exact for every safe integer; cjson would round to 14 digits).
 */
/**
 * Slots as `isSlot` (src/core/rpc/slot.ts) checks them, in Lua, shared by every entry script:
 * `is_slot(v)` for a number read from Redis, `arg_slot(s)` for an argument (nil for 'null', false
 * for anything that is not a slot).
 */
export const LUA_SLOTS = `
local MAX_SLOT = 9007199254740991
local function is_slot(v)
  return type(v) == 'number' and v >= 0 and v <= MAX_SLOT and math.floor(v) == v
end
local function arg_slot(s)
  if s == 'null' then return nil end
  if #s <= 16 and string.match(s, '^%d+$') and is_slot(tonumber(s)) then return tonumber(s) end
  return false
end
`;

const LUA_SPLIT = `${LUA_SLOTS}local function n(v) return string.format('%.0f', v) end
local function num(v) if type(v) == 'number' then return v end return nil end
local function meta_of(raw)
  if not raw then return nil end
  local ok, d = pcall(cjson.decode, raw)
  if not ok or type(d) ~= 'table' then return { rev = 0, count = 0, members = false, sound = false } end
  local m = {
    slot = num(d.slot), rev = num(d.rev), fetchedAt = num(d.fetchedAt), scanSlot = num(d.scanSlot),
    scannedAt = num(d.scannedAt), count = num(d.count) or 0, members = d.members == true,
  }
  m.sound = (m.slot == nil or is_slot(m.slot)) and is_slot(m.fetchedAt)
  if not is_slot(m.rev) then m.rev = 0 end
  return m
end
local function encode_meta(m)
  local s = '{"slot":' .. (m.slot and n(m.slot) or 'null') .. ',"rev":' .. n(m.rev) ..
    ',"fetchedAt":' .. n(m.fetchedAt or 0)
  if m.scanSlot then s = s .. ',"scanSlot":' .. n(m.scanSlot) end
  if m.scannedAt then s = s .. ',"scannedAt":' .. n(m.scannedAt) end
  return s .. ',"count":' .. n(math.max(0, m.count)) .. ',"members":' ..
    (m.members and 'true' or 'false') .. '}'
end
local function member_of(raw)
  if not raw then return nil end
  local ok, d = pcall(cjson.decode, raw)
  if ok and type(d) == 'table' and type(d[1]) == 'string' then return d end
  return {}
end
local function member_value(label, owner, slot)
  return '[' .. cjson.encode(label) .. ',' .. cjson.encode(owner) .. ',' .. n(slot) .. ']'
end
local function chunked(cmd, key, list)
  for i = 1, #list, 1000 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
  end
end
-- Drops the index fields of account \`acct\` of \`parent\` (and of its reverse record): only those
-- that still name that parent.
local function forget_index(index, parent, acct, reverse)
  local v = redis.call('HGET', index, acct)
  if v then
    -- The parent is any name the API takes (spaces, tabs): the accounts are the last words.
    local p, a, r = string.match(v, '^(.+) (%S+) (%S+)$')
    if a ~= acct then p, a = string.match(v, '^(.+) (%S+)$'); r = nil end
    if p == parent and a == acct then
      redis.call('HDEL', index, acct)
      if r and r ~= '' then reverse = reverse or r end
    end
  end
  if reverse then
    local rv = redis.call('HGET', index, reverse)
    if rv == parent .. ' ' .. acct then redis.call('HDEL', index, reverse) end
  end
end
local function index_member(index, parent, acct, reverse)
  redis.call('HSET', index, acct, parent .. ' ' .. acct .. ' ' .. reverse,
    reverse, parent .. ' ' .. acct)
end
-- Keys created by a write on an entry that lives on get the entry's remaining life.
local function same_life(meta_key, keys)
  local ttl = redis.call('PTTL', meta_key)
  if ttl <= 0 then return end
  for _, k in ipairs(keys) do
    if redis.call('PTTL', k) == -1 then redis.call('PEXPIRE', k, ttl) end
  end
end
`;

/**
 * A scan's write. KEYS: M L H I R. ARGV: 1 slot ('null' unknown), 2 fetchedAt, 3 scanSlot ('' none),
 * 4 scannedAt ('' none), 5 expiry (ms), 6 ceiling ('' unknown), 7 now (ms), 8 parent, 9 'm' (members
 * follow, one argument each: `account reverse [label,owner,slot]\nlabel`, the JSON holding no raw
 * newline; one argument rather than four because a scan's arguments cost the client more than the
 * script: 400,000 of them took ioredis about a second) or 'l' (labels only follow, as sorted-set
 * members). Refuses to take the entry back in
 * time, as the single-JSON layout's `next_rev` does (older slot; unknown slot: older fetchedAt; a
 * stored entry unsound or past the ceiling holds nothing back). Replaces the members and labels,
 * drops the index fields of accounts no longer listed and writes those of the listed ones, and
 * registers the parent at `now`. Returns the new revision, 0 when it kept the stored entry.
 */
export const PUT_SPLIT = `${LUA_SPLIT}
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
    if c.slot and slot and c.slot ~= slot then
      if slot < c.slot then return 0 end
    elseif c.fetchedAt and at < c.fetchedAt then
      return 0
    end
  end
  rev = c.rev + 1
end
local parent = ARGV[8]
local with_members = ARGV[9] == 'm'
local listed, hs, zs, is = {}, {}, {}, {}
local count = 0
if with_members then
  for i = 10, #ARGV do
    local arg = ARGV[i]
    local a = string.find(arg, ' ', 1, true)
    local b = string.find(arg, ' ', a + 1, true)
    local c = string.find(arg, '\\n', b + 1, true)
    local acct, reverse = string.sub(arg, 1, a - 1), string.sub(arg, a + 1, b - 1)
    listed[acct] = true
    hs[#hs + 1] = acct; hs[#hs + 1] = string.sub(arg, b + 1, c - 1)
    zs[#zs + 1] = 0; zs[#zs + 1] = string.sub(arg, c + 1) .. '\\0' .. acct
    is[#is + 1] = acct; is[#is + 1] = parent .. ' ' .. acct .. ' ' .. reverse
    is[#is + 1] = reverse; is[#is + 1] = parent .. ' ' .. acct
    count = count + 1
  end
else
  for i = 10, #ARGV do
    zs[#zs + 1] = 0; zs[#zs + 1] = ARGV[i]
    count = count + 1
  end
end
for _, acct in ipairs(redis.call('HKEYS', KEYS[3])) do
  if not listed[acct] then forget_index(KEYS[4], parent, acct, nil) end
end
redis.call('DEL', KEYS[2], KEYS[3])
chunked('HSET', KEYS[3], hs)
chunked('ZADD', KEYS[2], zs)
chunked('HSET', KEYS[4], is)
local ttl = ARGV[5]
redis.call('SET', KEYS[1], encode_meta({
  slot = slot, rev = rev, fetchedAt = at, scanSlot = tonumber(ARGV[3]),
  scannedAt = tonumber(ARGV[4]), count = count, members = with_members,
}), 'PX', ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)
redis.call('ZADD', KEYS[5], ARGV[7], parent)
redis.call('PEXPIRE', KEYS[5], ttl)
redis.call('PEXPIRE', KEYS[4], ttl)
return rev
`;

/**
 * Changes to some members. KEYS: M L H I. ARGV: 1 slot, 2 parent, 3 index expiry (ms), then five
 * arguments per change: account, reverse record, 'u' (upsert) or 'r' (remove), label, owner. A
 * change at a slot below its member's stored slot, or of an account not listed at a slot below
 * the last scan's, is ignored (an older notification arrived late: the scan saw its outcome);
 * an upsert that changes nothing raises the member's slot only. When something changed: the
 * revision is bumped and the entry's slot raised to `slot`. Returns `{outcome, rev}`: 'missing'
 * without an entry, or with one written without its members (nothing to patch: a scan writes them).
 */
export const APPLY_CHANGES = `${LUA_SPLIT}
local m = meta_of(redis.call('GET', KEYS[1]))
if not m then return { 'missing', 0 } end
if not m.members then return { 'missing', m.rev } end
local slot = arg_slot(ARGV[1])
if not slot then return redis.error_reply('ERR change slot is not a safe integer') end
local parent = ARGV[2]
local changed = false
for i = 4, #ARGV, 5 do
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
          redis.call('ZREM', KEYS[2], old[1] .. '\\0' .. acct)
        elseif not old then
          m.count = m.count + 1
        end
        redis.call('HSET', KEYS[3], acct, member_value(label, owner, slot))
        redis.call('ZADD', KEYS[2], 0, label .. '\\0' .. acct)
        index_member(KEYS[4], parent, acct, reverse)
        changed = true
      end
    elseif old then
      redis.call('HDEL', KEYS[3], acct)
      if type(old[1]) == 'string' then redis.call('ZREM', KEYS[2], old[1] .. '\\0' .. acct) end
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
`;

/**
 * An existence check's write. KEYS: M L H I. ARGV: 1 fetchedAt (ms), 2 the slot the check read at
 * ('null' unknown), 3 parent, then the accounts found gone. Drops each of them unless its member's
 * slot is past the check's (added after what the check saw); raises fetchedAt and the slot to the
 * check's; bumps the revision. Returns `{outcome, rev, dropped}`, 'missing' without an entry.
 */
export const MARK_CHECKED = `${LUA_SPLIT}
local m = meta_of(redis.call('GET', KEYS[1]))
if not m then return { 'missing', 0, 0 } end
local at = tonumber(ARGV[1])
local slot = arg_slot(ARGV[2])
if slot == false or not is_slot(at) then
  return redis.error_reply('ERR check slot or fetchedAt is not a safe integer')
end
local parent = ARGV[3]
local dropped = 0
for i = 4, #ARGV do
  local acct = ARGV[i]
  local old = member_of(redis.call('HGET', KEYS[3], acct))
  if old and not (slot and is_slot(old[3]) and old[3] > slot) then
    redis.call('HDEL', KEYS[3], acct)
    if type(old[1]) == 'string' then redis.call('ZREM', KEYS[2], old[1] .. '\\0' .. acct) end
    forget_index(KEYS[4], parent, acct, nil)
    m.count = m.count - 1
    dropped = dropped + 1
  end
end
if not m.fetchedAt or at > m.fetchedAt then m.fetchedAt = at end
if slot and (not m.slot or slot > m.slot) then m.slot = slot end
m.rev = m.rev + 1
redis.call('SET', KEYS[1], encode_meta(m), 'KEEPTTL')
return { 'written', m.rev, dropped }
`;

/**
 * A use of an entry. KEYS: M L H I R. ARGV: 1 expiry (ms), 2 now (ms), 3 parent. When the entry
 * exists: its three keys live `expiry` from now, the parent's registry score is `now`, and the
 * index and registry live at least as long. Returns 1, or 0 without an entry.
 */
export const TOUCH = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
redis.call('ZADD', KEYS[5], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[5], ARGV[1])
redis.call('PEXPIRE', KEYS[4], ARGV[1])
return 1
`;

/**
 * Reads an entry: KEYS M L. Returns nil without one, else `{head, labels...}` (sorted-set order).
 */
export const GET_SPLIT = `
local head = redis.call('GET', KEYS[1])
if not head then return nil end
local out = redis.call('ZRANGE', KEYS[2], 0, -1)
table.insert(out, 1, head)
return out
`;

/**
 * Reads an entry with its members: KEYS M L H. Returns nil without one, else `{head, 'm', account,
 * value, ...}` when it keeps its members, `{head, 'l', label-members...}` when it was written
 * without them.
 */
export const GET_WITH_MEMBERS = `
local head = redis.call('GET', KEYS[1])
if not head then return nil end
local out
if string.find(head, '"members":true', 1, true) then
  out = redis.call('HGETALL', KEYS[3])
  table.insert(out, 1, 'm')
else
  out = redis.call('ZRANGE', KEYS[2], 0, -1)
  table.insert(out, 1, 'l')
end
table.insert(out, 1, head)
return out
`;

/**
 * Removes parents idle since before a time. KEYS: R I. ARGV: 1 the time (ms), 2 most parents, 3
 * most members (the batch stops once it has dropped this many), 4..6 the prefixes of M, L and H
 * keys of the endpoint (the parent follows; same hash tag as KEYS, so one cluster slot). Drops each
 * parent's members' index fields, its keys and its registry entry. Returns `{removed, more}`
 * (more = 1 when the batch stopped at a bound).
 */
export const SWEEP = `${LUA_SPLIT}
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
`;

/**
 * One step of the index's own sweep. KEYS: I. ARGV: 1 the HSCAN cursor, 2 its COUNT, 3 the prefix of
 * M keys of the endpoint (the parent follows; same hash tag as KEYS). Drops the fields whose
 * parent has no entry: those the sweep could not name, its members' hash having expired first (a
 * sweep fallen behind, workers down). Safe whatever runs beside it: a parent without an entry
 * routes nothing, and a scan writes its fields anew. Returns `{next cursor, dropped}`.
 */
export const SWEEP_INDEX = `
local scan = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local fields, dropped, alive = scan[2], 0, {}
for i = 1, #fields, 2 do
  local f, v = fields[i], fields[i + 1]
  local p, a = string.match(v, '^(.+) (%S+) %S+$')
  if a ~= f then p = string.match(v, '^(.+) %S+$') end
  if p then
    if alive[p] == nil then alive[p] = redis.call('EXISTS', ARGV[3] .. p) == 1 end
    if not alive[p] then
      redis.call('HDEL', KEYS[1], f)
      dropped = dropped + 1
    end
  end
end
return { scan[1], dropped }
`;
