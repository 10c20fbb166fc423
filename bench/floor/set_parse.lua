-- set_parse.lua: set_cmds.lua plus the least Lua an absolute join needs on
-- each hash: the meta field parsed (abs_set.lua's pattern, two numbers
-- converted) and formatted anew; no decision, no reply beyond 1. What a set
-- of limits costs before its own logic. instr.sh counts it.
--
-- KEYS[i]  the hash of limit i
-- ARGV[1]  now in ms; ARGV[2] n; ARGV[3 + 4(i-1) ..] W, B, C, TTL of limit i
--          (abs_set.lua's arguments)
-- Reply: 1
local n = ARGV[2] + 0
local fmt = string.format
for i = 1, #KEYS do
  local a = 4 * i - 1
  local h = KEYS[i]
  local mv = redis.call('HGET', h, 'm')
  local cs, us, os, ns, ncs
  if mv then cs, us, os, ns, ncs = string.match(mv, '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+)$') end
  if ns then
    redis.call('HSET', h, 'm', fmt('%s %d %s %s %d', ARGV[a + 2], us + n, os, ns, ncs + n))
  else
    redis.call('HSET', h, 'm', ARGV[a + 2] .. ' 1 ' .. ARGV[1] .. ' ' .. ARGV[1] .. ' 1')
  end
  redis.call('PEXPIRE', h, ARGV[a + 3])
end
return 1
