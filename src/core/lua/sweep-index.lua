-- One step of the index's own sweep. KEYS: I. ARGV: 1 the HSCAN cursor, 2 its COUNT, 3 the prefix of
-- M keys of the endpoint (the parent follows; same hash tag as KEYS). Drops the fields whose
-- parent has no entry: those the sweep could not name, its members' hash having expired first (a
-- sweep fallen behind, workers down). Safe whatever runs beside it: a parent without an entry
-- routes nothing, and a scan writes its fields anew. Returns `{next cursor, dropped}`.

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
