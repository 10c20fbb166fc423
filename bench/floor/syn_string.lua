-- syn_string.lua: the fewest commands a design with Redis TIME and a TTL
-- on every write can make (TIME, GET, SET PX: what redis_rate makes; SET PX
-- as PSETEX, as abs_string.lua sends it), with no logic around them: the
-- floor of abs_string.lua's layout. It writes a value of abs_string.lua's
-- size on instr.sh's 10k path (the header and five closed buckets, 128
-- bytes), with ARGV[6] as the PX (60600 without arguments, as run.sh calls
-- it), and replies one integer, as an admission does.
local h = KEYS[1]
local t = redis.call('TIME')
local v = redis.call('GET', h)
redis.call('PSETEX', h, ARGV[6] or 60600, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')
return 4294967296000 + 1010
