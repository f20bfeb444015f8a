-- Facts from the stream. KEYS: 1 journal, 2 state. ARGV: 1 the index's prefix
-- (`<prefix>:registry:`), then six per fact: kind (L, O, D), slot, then L: parent id, account,
-- reverse, label; O: parent id, account, owner, ''; D: account, '', '', ''; U (a member the chain
-- does not list, found by the audit): parent id, account, '', ''. Returns `{changed parent keys, accounts whose
-- owner is unknown}`. Members older than the last build's floor read as not listed (the include
-- says why), and a fact older than the floor of a member the index does not hold is dropped.

--- @include "includes/registry-member"
local st = redis.call('HMGET', KEYS[2], 'status', 'floor')
local building = st[1] == 'building'
local floor = tonumber(st[2]) or 0
local function load(pk, acct) return at_floor(parse(redis.call('HGET', pkey(pk), acct)), floor) end
local changed, need, seen = {}, {}, {}
local function put(pk, acct, m, before)
  redis.call('HSET', pkey(pk), acct, encode(m))
  if listed(m) ~= before or listed(m) then
    if not seen[pk] then seen[pk] = true; changed[#changed + 1] = pk end
  end
end
local function journal(acct, value, slot)
  local js = jslot(redis.call('HGET', KEYS[1], acct))
  if js and js > slot then return end
  redis.call('HSET', KEYS[1], acct, value)
end
for i = 2, #ARGV, 6 do
  local kind, slot = ARGV[i], tonumber(ARGV[i + 1])
  local a, b, c, d = ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  if kind == 'L' then
    local pk, acct, rev, label = a, b, c, '+' .. d
    local m = load(pk, acct)
    local fresh = m == nil
    -- Older than the floor, of a member neither that build nor a later fact holds: the chain no
    -- longer listed it at the floor, so it changes nothing.
    if not (fresh and slot < floor) then
      m = m or { slot = slot, owner = '', label = '' }
      local before = listed(m) and not fresh
      local moved = merge(m, 'label', label, slot)
      if m.owner == '' then
        local j = redis.call('HGET', KEYS[1], acct)
        local jp, jo = string.match(j or '', '^%d+|([^|]+)|(.+)$')
        if jp == pk then
          m.owner = jo
          moved = true
          if jslot(j) > m.slot then m.slot = jslot(j) end
        end
      end
      if moved or fresh then
        put(pk, acct, m, before)
        index_member(pk, acct, rev)
      else
        redis.call('HSET', pkey(pk), acct, encode(m))
      end
      if m.owner == '' and string.sub(m.label, 1, 1) == '+' then need[#need + 1] = acct end
    end
  elseif kind == 'O' then
    local pk, acct, owner = a, b, c
    local m = load(pk, acct)
    if m then
      local before = listed(m)
      if merge(m, 'owner', owner, slot) then put(pk, acct, m, before)
      else redis.call('HSET', pkey(pk), acct, encode(m)) end
    elseif building then
      journal(acct, string.format('%.0f', slot) .. '|' .. pk .. '|' .. owner, slot)
    end
  elseif kind == 'U' then
    local m = load(a, b)
    if m then
      local before = listed(m)
      if merge(m, 'label', '-', slot) then put(a, b, m, before) end
    end
  elseif kind == 'D' then
    local acct = a
    local pk, sub, f = indexed(acct)
    if pk and f == 'label' then sub = find_sub(pk, sub) end
    if sub then
      local m = load(pk, sub)
      if m then
        local before = listed(m)
        if merge(m, f, '-', slot) then put(pk, sub, m, before) end
      end
    elseif building then
      journal(acct, string.format('%.0f', slot) .. '|del', slot)
    end
  end
end
return { changed, need }
