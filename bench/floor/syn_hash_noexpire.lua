-- The commands an admitted absolute Inc must make under DESIGN.md §7 (Redis
-- every write) less the PEXPIRE, with no logic around them, and an 8-number reply.
local h = KEYS[1]
local t = redis.call('TIME')
local m = redis.call('HMGET', h, 'c', 'u', 'o', 'n')
redis.call('HINCRBY', h, '1732270000000', 1)
redis.call('HSET', h, 'c', 1000000, 'u', 5, 'o', 1732270000000)
return {0, 1, 1000000, 999995, 0, 60000, 0, 0}
