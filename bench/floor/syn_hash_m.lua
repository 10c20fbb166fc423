-- syn_hash_m.lua: the commands of the cheapest hash layout instr.sh's 10k
-- path could make, with no logic around them: abs_string.lua's value in
-- the hash's field m (no field per bucket, so no HGET or HDEL of the dead
-- one): Redis TIME, HMGET m v, HSET m of abs_string.lua's 128 bytes on
-- the path, PEXPIRE ARGV[6] (a hash has no SET PX), one integer as the
-- reply.
local h = KEYS[1]
local t = redis.call('TIME')
local mr = redis.call('HMGET', h, 'm', 'v')
redis.call('HSET', h, 'm', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')
redis.call('PEXPIRE', h, ARGV[6])
return 4294967296000 + 1010
