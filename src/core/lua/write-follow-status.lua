-- Sets the status, in one step that never moves `epoch` back (a worker taking the stream over
-- with an older idea of it cannot make entries fresh again). KEYS[1] the status. ARGV: epoch,
-- healthyUntil, mode, expiry (ms), deletesSince (ms; '': no Delete waits for its read),
-- healingSince (ms; '': no heal under way), vouchedAt (ms; '': vouching now, or the last vouch
-- unknown).

local epoch = tonumber(ARGV[1])
local raw = redis.call('GET', KEYS[1])
if raw then
  local ok, d = pcall(cjson.decode, raw)
  if ok and type(d) == 'table' and type(d.epoch) == 'number' and d.epoch > epoch then
    epoch = d.epoch
  end
end
local value = '{"epoch":' .. string.format('%.0f', epoch) .. ',"healthyUntil":' .. ARGV[2] ..
  ',"mode":"' .. ARGV[3] .. '"'
if ARGV[5] ~= nil and ARGV[5] ~= '' then value = value .. ',"deletesSince":' .. ARGV[5] end
if ARGV[6] ~= nil and ARGV[6] ~= '' then value = value .. ',"healingSince":' .. ARGV[6] end
if ARGV[7] ~= nil and ARGV[7] ~= '' then value = value .. ',"vouchedAt":' .. ARGV[7] end
value = value .. '}'
redis.call('SET', KEYS[1], value, 'PX', ARGV[4])
return value
