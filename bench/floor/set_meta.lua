-- set_meta.lua: the floor of a layout that sets of limits do not use, kept
-- to size it: the meta fields of a set's three limits in one hash
-- (KEYS[1], fields "a", "b" and "c"), the buckets in one hash per limit
-- (KEYS[2..4], which a join does not touch). An admitted join of every
-- limit then reads the three meta fields in one HMGET, parses each as
-- set_parse_keep.lua does, and writes them back in one HSET: no PEXPIRE (a
-- join keeps the TTL its bucket's open set), no decision, no reply beyond
-- 1. instr.sh counts it beside set_parse_keep.lua, the same work on one
-- hash per limit, and set_meta_cmds.lua, its commands alone.
--
-- KEYS[1]  the meta hash; KEYS[2..4] the limits' hashes (not touched)
-- ARGV     as abs_set.lua: now, n, then W, B, C, TTL for each of 3 limits
-- Reply: 1
local n = ARGV[2] + 0
local mv = redis.call('HMGET', KEYS[1], 'a', 'b', 'c')
local function one(v, a) -- limit i's meta field anew; a = 4i - 1
  local cs, us, os, ns, ncs
  if v then cs, us, os, ns, ncs = string.match(v, '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+)$') end
  if ns then
    return ARGV[a + 2] .. ' ' .. (us + n) .. ' ' .. os .. ' ' .. ns .. ' ' .. (ncs + n)
  end
  return ARGV[a + 2] .. ' 1 ' .. ARGV[1] .. ' ' .. ARGV[1] .. ' 1'
end
redis.call('HSET', KEYS[1], 'a', one(mv[1], 3), 'b', one(mv[2], 7), 'c', one(mv[3], 11))
return 1
