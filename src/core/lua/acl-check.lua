-- Checks argument vectors (each ended by an empty string) with `redis.acl_check_cmd` (Redis 7+)
-- without running them; a refused one is rechecked bare to tell a refused key/channel apart.
-- Returns flat `name, reason` pairs.

local out, argv = {}, {}
local function check()
  if #argv == 0 then return end
  if not redis.acl_check_cmd(unpack(argv)) then
    local parts = {argv[1]}
    if argv[1] == 'client' or argv[1] == 'command' then parts[2] = argv[2] end
    out[#out + 1] = table.concat(parts, '|')
    out[#out + 1] = redis.acl_check_cmd(unpack(parts)) and 'key-or-channel' or 'command'
  end
  argv = {}
end
for _, a in ipairs(ARGV) do
  if a == '' then check() else argv[#argv + 1] = a end
end
check()
return out
