-- The fewest commands any design with Redis TIME and a TTL on every write
-- can make (TIME, GET, SET PX: what redis_rate makes), with no logic
-- around them, and an 8-number reply.
local h = KEYS[1]
local t = redis.call('TIME')
local v = redis.call('GET', h)
redis.call('SET', h, '1000000 5 1732270000000 1732270000000 5;', 'PX', 60600)
return {0, 1, 1000000, 999995, 0, 60000, 0, 0}
