-- The commands of syn_hash.lua (an admitted absolute Inc in the one-hash
-- data model of docs/data-model.md: Redis TIME, read the hash, count the
-- unit, update the meta fields) less the PEXPIRE, with no logic around
-- them, and an 8-number reply.
local h = KEYS[1]
local t = redis.call('TIME')
local m = redis.call('HMGET', h, 'c', 'u', 'o', 'n')
redis.call('HINCRBY', h, '1732270000000', 1)
redis.call('HSET', h, 'c', 1000000, 'u', 5, 'o', 1732270000000)
return {0, 1, 1000000, 999995, 0, 60000, 0, 0}
