-- set_parse_keep.lua: set_parse.lua without the PEXPIRE: the least Lua and
-- the commands of an admitted join of every limit of a set on one hash per
-- limit, on the production path, where a join keeps the TTL its bucket's
-- open set (HGET and HSET of each limit's meta field). The yardstick of
-- set_meta.lua. instr.sh counts it.
--
-- KEYS[i]  the hash of limit i
-- ARGV     as abs_set.lua: now, n, then W, B, C, TTL per limit
-- Reply: 1
local n = ARGV[2] + 0
for i = 1, #KEYS do
  local a = 4 * i - 1
  local h = KEYS[i]
  local mv = redis.call('HGET', h, 'm')
  local cs, us, os, ns, ncs
  if mv then cs, us, os, ns, ncs = string.match(mv, '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+)$') end
  if ns then
    redis.call('HSET', h, 'm', ARGV[a + 2] .. ' ' .. (us + n) .. ' ' .. os .. ' ' .. ns .. ' ' .. (ncs + n))
  else
    redis.call('HSET', h, 'm', ARGV[a + 2] .. ' 1 ' .. ARGV[1] .. ' ' .. ARGV[1] .. ' 1')
  end
end
return 1
