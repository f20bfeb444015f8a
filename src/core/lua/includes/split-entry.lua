-- What the scripts of the configured endpoint's entries share (docs/design.md, "The subdomain
-- cache"). Per (endpoint, parent): `M` the head (a JSON string), `L` the labels (a sorted set, score
-- 0, member `label .. "\0" .. account`), `H` the members (a hash, account -> JSON
-- `[label, owner, slot]`); per endpoint: `I` the member-parents index (a hash: subdomain account ->
-- `parent account reverse`, reverse record -> `parent account`), `R` the followed parents (a sorted
-- set, parent -> last use in ms).
--
-- Every script touches only the accounts it is given (a scan's put, which replaces them all, and
-- the sweep aside), so a change costs O(accounts touched · log n) whatever the parent's size.
-- Numbers are written with `%.0f` (exact for every safe integer; cjson would round to 14 digits).

--- @include "slots"
local function n(v) return string.format('%.0f', v) end
local function num(v) if type(v) == 'number' then return v end return nil end
local function meta_of(raw)
  if not raw then return nil end
  local ok, d = pcall(cjson.decode, raw)
  if not ok or type(d) ~= 'table' then return { rev = 0, count = 0, sound = false } end
  local m = {
    slot = num(d.slot), rev = num(d.rev), fetchedAt = num(d.fetchedAt), scanSlot = num(d.scanSlot),
    scannedAt = num(d.scannedAt), count = num(d.count) or 0,
    owes = num(d.owes),
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
  if m.owes then s = s .. ',"owes":' .. n(m.owes) end
  return s .. ',"count":' .. n(math.max(0, m.count)) .. '}'
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
-- The members of a scan's write, packed in one text (src/core/cache/packed-members.ts): each
-- `account reverse bytes ["label","owner"\nlabel`, `bytes` the label's length in bytes (the JSON
-- head holds no raw newline, so the first one ends it; the label is any bytes), its value the head
-- closed with `slot` (text). Returns the HSET arguments of H, the ZADD arguments of L and the HSET
-- arguments of I for `parent`, and how many members; `listed` (when given) gets each account as a
-- key.
local function read_members(packed, slot, parent, listed)
  local hs, zs, is = {}, {}, {}
  local h, x = 0, 0
  local find, sub = string.find, string.sub
  local close = ',' .. slot .. ']'
  local pos, size = 1, #packed
  while pos <= size do
    local a = find(packed, ' ', pos, true)
    local b = find(packed, ' ', a + 1, true)
    local l = find(packed, ' ', b + 1, true)
    local c = find(packed, '\n', l + 1, true)
    local after = c + tonumber(sub(packed, b + 1, l - 1))
    local acct, reverse = sub(packed, pos, a - 1), sub(packed, a + 1, b - 1)
    if listed then listed[acct] = true end
    local named = parent .. ' ' .. acct
    hs[h + 1] = acct; hs[h + 2] = sub(packed, l + 1, c - 1) .. close
    zs[h + 1] = 0; zs[h + 2] = sub(packed, c + 1, after) .. '\0' .. acct
    h = h + 2
    is[x + 1] = acct; is[x + 2] = named .. ' ' .. reverse
    is[x + 3] = reverse; is[x + 4] = named
    x = x + 4
    pos = after + 1
  end
  return hs, zs, is, h / 2
end
local function chunked(cmd, key, list)
  for i = 1, #list, 1000 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
  end
end
-- Drops the index fields of account `acct` of `parent` (and of its reverse record): only those
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
