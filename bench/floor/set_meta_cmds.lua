-- set_meta_cmds.lua: set_meta.lua's commands alone (HMGET of the three
-- meta fields of one hash, HSET of them), writing back what it read (a
-- made-up meta field the first time). instr.sh counts it.
--
-- KEYS[1]  the meta hash; KEYS[2..4] the limits' hashes (not touched)
-- Reply: 1
local z = '1000 1 1732270000000 1732270000000 1'
local mv = redis.call('HMGET', KEYS[1], 'a', 'b', 'c')
redis.call('HSET', KEYS[1], 'a', mv[1] or z, 'b', mv[2] or z, 'c', mv[3] or z)
return 1
