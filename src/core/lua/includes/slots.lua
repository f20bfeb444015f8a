-- Slots as `isSlot` (src/core/rpc/slot.ts) checks them, in Lua, shared by every entry script:
-- `is_slot(v)` for a number read from Redis, `arg_slot(s)` for an argument (nil for 'null', false
-- for anything that is not a slot).

local MAX_SLOT = 9007199254740991
local function is_slot(v)
  return type(v) == 'number' and v >= 0 and v <= MAX_SLOT and math.floor(v) == v
end
local function arg_slot(s)
  if s == 'null' then return nil end
  if #s <= 16 and string.match(s, '^%d+$') and is_slot(tonumber(s)) then return tonumber(s) end
  return false
end
