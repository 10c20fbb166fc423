-- set_cmds.lua: the commands of an admitted join on each hash in KEYS
-- (HGET of the meta field, HSET of it, PEXPIRE) and no other work: what a
-- set of limits (abs_set.lua) pays in commands before any Lua of its own;
-- with one key, what a single abs_inc.lua join pays. It writes back what
-- it read (a made-up meta field the first time). instr.sh counts it.
--
-- KEYS[i]  a hash
-- ARGV[1]  unused (the clock of the scripts it stands beside)
-- Reply: 1
for i = 1, #KEYS do
  local h = KEYS[i]
  local m = redis.call('HGET', h, 'm') or '1 1 1732270000000 1732270000000 1'
  redis.call('HSET', h, 'm', m)
  redis.call('PEXPIRE', h, 3600000)
end
return 1
