-- set_counter.lua: the floor of a count layout that sets of limits do not
-- use, kept to size it: each limit's meta field holds offsets against one
-- admission counter of the set ("a" in the first limit's hash), so that an
-- admitted join reads every limit's meta field (HGET, parsed as
-- set_parse_keep.lua parses it) and writes the counter alone (HINCRBY),
-- where today it rewrites every limit's meta field. No PEXPIRE (a join
-- keeps the TTL its bucket's open set), no decision, no reply beyond 1.
-- instr.sh counts it beside set_parse_keep.lua.
--
-- KEYS[i]  the hash of limit i
-- ARGV     as abs_set.lua: now, n, then W, B, C, TTL per limit
-- Reply: 1
local n = ARGV[2] + 0
local a = redis.call('HGET', KEYS[1], 'a')
a = a and a + 0 or 0
for i = 1, #KEYS do
  local h = KEYS[i]
  local mv = redis.call('HGET', h, 'm')
  local cs, us, os, ns, ncs
  if mv then cs, us, os, ns, ncs = string.match(mv, '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+)$') end
  if not ns then
    redis.call('HSET', h, 'm', ARGV[4 * i + 1] .. ' 0 ' .. ARGV[1] .. ' ' .. ARGV[1] .. ' 0')
  else
    local used, ncount = a - us, a - ncs -- the limit's counts, from its offsets
    if used < 0 or ncount < 0 then return redis.error_reply('bad offsets') end
  end
end
redis.call('HINCRBY', KEYS[1], 'a', n)
return 1
