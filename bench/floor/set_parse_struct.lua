-- set_parse_struct.lua: set_parse.lua with the meta field packed as
-- binary doubles (struct.pack '<ddddd') instead of decimals: what parsing
-- and formatting cost when no decimal is read or written. instr.sh counts
-- it.
--
-- KEYS[i]  the hash of limit i
-- ARGV[1]  now in ms; ARGV[2] n; ARGV[3 + 4(i-1) ..] W, B, C, TTL of limit i
-- Reply: 1
local n = ARGV[2] + 0
local pack, unpack = struct.pack, struct.unpack
for i = 1, #KEYS do
  local a = 4 * i - 1
  local h = KEYS[i]
  local mv = redis.call('HGET', h, 'm')
  if mv and #mv == 40 then
    local c, u, o, nw, nc = unpack('<ddddd', mv)
    redis.call('HSET', h, 'm', pack('<ddddd', ARGV[a + 2], u + n, o, nw, nc + n))
  else
    redis.call('HSET', h, 'm', pack('<ddddd', ARGV[a + 2], 1, ARGV[1], ARGV[1], 1))
  end
  redis.call('PEXPIRE', h, ARGV[a + 3])
end
return 1
