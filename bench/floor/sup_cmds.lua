-- sup_cmds.lua: the commands of sup_inc.lua's usual call on a busy key and
-- no other work: Redis TIME (when ARGV[1] is empty, as the script reads
-- it), HMGET of the meta fields "m" and "k", HSET of "m", and PEXPIRE when
-- the clock is an argument (sup_inc.lua then sets it on every write; under
-- Redis TIME a join skips it). It writes back the "m" it read (made-up
-- values of an overloaded key the first time, with "k" holding a cached
-- factor and a RetryAfter cursor) and answers with one integer, as the
-- overloaded refusal and the admitted join both do. What those two paths
-- pay in commands before any Lua of their own. instr.sh counts it.
--
-- KEYS[1]  a hash of the suppressed layout (docs/data-model.md)
-- ARGV     sup_inc.lua's; only ARGV[1] (the clock) and ARGV[9] (the
--          PEXPIRE in ms) are read
-- Reply: an integer
local ARGV, redis = ARGV, redis -- as sup_inc.lua: locals
local h = KEYS[1]
if ARGV[1] == '' then redis.call('TIME') end
local mk = redis.call('HMGET', h, 'm', 'k')
if mk[1] then
  redis.call('HSET', h, 'm', mk[1])
else
  redis.call('HSET', h, 'm', '1502 1402 1732270000000 1732270001000 10 9',
    'k', '100 150 333333 1732270000950 10 90 1 10')
end
if ARGV[1] ~= '' then redis.call('PEXPIRE', h, ARGV[9]) end
return -1234567890123
