-- What the registry index's scripts share (src/core/cache/registry-index.ts says the layout and
-- the rules): ARGV[1] the index's prefix (`<prefix>:registry:`), the keys of a parent's hash and of
-- a bucket of the accounts index, and a member's value `slot|owner|label` (slot in base 36, the
-- owner `#` and its 32 bytes).
-- ID_CHARS and BUCKET_CHARS are those of registry-index.ts (test/lua-scripts.test.ts holds them
-- equal).

local ID_CHARS = 16
local BUCKET_CHARS = 2
local R = ARGV[1]
local function pkey(pid) return R .. 'p:' .. pid end
local function bucket(acct) return R .. 'a:' .. string.sub(acct, 1, BUCKET_CHARS) end
local function aget(acct)
  return redis.call('HGET', bucket(acct), string.sub(acct, BUCKET_CHARS + 1, ID_CHARS))
end
-- A name account's entry is its parent id; a reverse record's, `@` and the first ID_CHARS of its
-- name account, whose own entry names the parent (half the bytes of naming it twice).
local function index_member(pid, acct, rev)
  redis.call('HSET', bucket(acct), string.sub(acct, BUCKET_CHARS + 1, ID_CHARS), pid)
  redis.call('HSET', bucket(rev), string.sub(rev, BUCKET_CHARS + 1, ID_CHARS),
    '@' .. string.sub(acct, 1, ID_CHARS))
end
-- What a deleted account was in the index: its parent id, the member's name account (or the first
-- ID_CHARS of it, for a reverse record) and the fact it ends ('owner' or 'label'); nil if unknown.
-- Reads the older form of a reverse record's entry, `<parent id> <name account prefix>`, too.
local function indexed(acct)
  local idx = aget(acct)
  if not idx then return nil end
  local prefix = string.match(idx, '^@(%S+)$')
  if prefix then
    local pid = aget(prefix)
    if not pid then return nil end
    return pid, prefix, 'label'
  end
  local pid, old = string.match(idx, '^(%S+) (%S+)$')
  if pid then return pid, old, 'label' end
  return idx, acct, 'owner'
end
-- The member of parent `pid` whose name account starts with `prefix` (a reverse record's entry
-- keeps that much of it): one field in the parent's hash.
local function find_sub(pid, prefix)
  local cursor = '0'
  repeat
    local r = redis.call('HSCAN', pkey(pid), cursor, 'MATCH', prefix .. '*', 'COUNT', 1000)
    cursor = r[1]
    if r[2][1] then return r[2][1] end
  until cursor == '0'
  return nil
end
local DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz'
local function b36(n)
  local out = ''
  repeat
    local r = n % 36
    out = string.sub(DIGITS, r + 1, r + 1) .. out
    n = math.floor(n / 36)
  until n == 0
  return out
end
-- The owner is `#` and its 32 bytes (registry-index.ts writes it so), or text up to the next `|`
-- ('' unknown, '-' gone, or base58 of an older write).
local function parse(v)
  if not v then return nil end
  local s, rest = string.match(v, '^(%w+)|(.*)$')
  if not s then return nil end
  local o, l
  if string.byte(rest, 1) == 35 and string.byte(rest, 34) == 124 then
    o, l = string.sub(rest, 1, 33), string.sub(rest, 35)
  else
    o, l = string.match(rest, '^([^|]*)|(.*)$')
    if not o then return nil end
  end
  return { slot = tonumber(s, 36), owner = o, label = l }
end
local function encode(m)
  return b36(m.slot) .. '|' .. m.owner .. '|' .. m.label
end
local function listed(m)
  return m ~= nil and m.owner ~= '' and m.owner ~= '-' and string.sub(m.label, 1, 1) == '+'
end
-- A fact at `slot` for field `f` of member m: fills an unknown one whatever the slot, changes a
-- known or deleted one only from a slot no lower than the member's.
local function merge(m, f, value, slot)
  if m[f] == value then
    if slot > m.slot then m.slot = slot end
    return false
  end
  if m[f] ~= '' and slot < m.slot then return false end
  m[f] = value
  if slot > m.slot then m.slot = slot end
  return true
end
local function jslot(j) return j and tonumber(string.match(j, '^(%d+)|')) end
-- The floor (the state's `floor`): the lowest slot the last complete build read a page at. Every
-- member that build's pages found, and every fact the stream saw since, is at the floor or later;
-- a member older than it was in no page, so the chain did not list it then (a Delete the stream
-- missed before the build): it reads as its label gone at the floor, its owner unknown.
local function at_floor(m, floor)
  if m and m.slot < floor then return { slot = floor, owner = '', label = '-' } end
  return m
end
