-- What the script of `?rpc=` overrides' entries uses (the configured endpoint's entries are in
-- split-entry.lua). An override's entry is stored as `{"slot":S,"rev":R,"fetchedAt":T,"labels":[..]}`
-- in that order, so `head(raw)` reads what the scripts compare from the head of the value without
-- decoding thousands of labels; an entry whose slot is null (the RPC gave none) is decoded. `older(...)` says whether a new entry would take the stored one back in time: a lower
-- slot when both slots are known, else an earlier fetchedAt; `next_rev(key, slot, at, ceiling)` the
-- revision a write of that entry gets, or nil when the stored one is newer.
--
-- Slots are checked as `isSlot` (src/core/rpc/slot.ts) checks them. A write whose slot or fetchedAt is
-- not one is refused with an error (the callers check first; this keeps `Infinity` or a float past
-- 2^53 out of the store whatever a caller does). A stored entry whose slot is not one (cjson reads
-- `Infinity`, which JSON.parse refuses), whose fetchedAt is not finite, or whose slot is past
-- `ceiling` (the highest slot the chain can have reached, when the caller knows it) holds no write
-- back: it would otherwise refuse every scan, for as long as it lives.
--- @include "slots"
local function bad_args(slot, at)
  if arg_slot(slot) == false or not is_slot(tonumber(at)) then
    return redis.error_reply('ERR entry slot or fetchedAt is not a safe integer')
  end
end
local function head(raw)
  local s, r, a = string.match(raw, '^{"slot":(%d+),"rev":(%d+),"fetchedAt":(%d+)')
  local slot, rev, at
  if a then
    slot, rev, at = tonumber(s), tonumber(r), tonumber(a)
  else
    local ok, d = pcall(cjson.decode, raw)
    if not ok or type(d) ~= 'table' then return nil, 0, nil, false end
    local function num(v) if type(v) == 'number' then return v end return nil end
    slot, rev, at = num(d.slot), num(d.rev), num(d.fetchedAt)
  end
  local sound = (slot == nil or is_slot(slot)) and (at == nil or is_slot(at))
  if not is_slot(rev) then rev = 0 end
  return slot, rev, at, sound
end
local function older(cslot, cat, slot, at)
  if cslot and slot and cslot ~= slot then return slot < cslot end
  return cat ~= nil and at < cat
end
local function entry(slot, rev, at, rest)
  return '{"slot":' .. slot .. ',"rev":' .. rev .. ',"fetchedAt":' .. at .. ',' .. rest
end
local function next_rev(key, slot, at, ceiling)
  local current = redis.call('GET', key)
  if not current then return 1 end
  local cslot, crev, cat, sound = head(current)
  if not sound or (ceiling and cslot and cslot > ceiling) then return crev + 1 end
  if older(cslot, cat, slot, at) then return nil end
  return crev + 1
end
