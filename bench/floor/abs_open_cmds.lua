-- abs_open_cmds.lua: the commands abs_inc.lua makes on an admission that
-- opens a bucket and drops the one that died (10,000 keys called every
-- 200 ms, W = 1 s, B = 10 ms), with the least work that finds the names:
-- Redis TIME when ARGV[1] is empty, HMGET m v, HGET and HDEL of the dead
-- oldest bucket, HSET of the closed newest bucket and "m", PEXPIRE, and one
-- integer as the reply. The positions of o and n in "m" are fixed for
-- this traffic (a 4-digit capacity, a 1-digit total): no parsing. It
-- runs on the state abs_inc.lua leaves (floor/sections.sh, FLOOR=).
local ARGV, redis = ARGV, redis
local h = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000
else
  now = ARGV[1]
end
local mr = redis.call('HMGET', h, 'm', 'v')
local m = mr[1]
if not m then
  redis.call('HSET', h, 'm', '1000 1 ' .. now .. ' ' .. now .. ' 1', 'v', 'a2 1000 10')
  redis.call('PEXPIRE', h, ARGV[6])
  return 1
end
local o, n = string.sub(m, 8, 20), string.sub(m, 22, 34)
if m == n then return 2 end
if o ~= n then
  redis.call('HGET', h, o)
  redis.call('HDEL', h, o)
end
redis.call('HSET', h, n, '4294967496', 'm', '1000 6 ' .. (o + 200) .. ' ' .. now .. ' 1')
redis.call('PEXPIRE', h, ARGV[6])
return 4294967296000 + 1010
