-- sup_join_parse.lua: sup_cmds.lua plus the numbers sup_inc.lua parses
-- and formats on an admitted join below the soft capacity, with no
-- decision: the clock (Redis TIME or ARGV[1]), W, B and S (a cost of 1 is
-- not parsed; H, the cache period and the draw are not needed), "m"
-- split by the script's pattern and "k" compared whole with "<S> <H> 0 0"
-- as the script does on a key with no declined unit (matched by its
-- pattern otherwise), four of "m"'s values (a "0" of declined units is not
-- parsed), and "m" formatted anew with two computed numbers, as such a
-- join writes it. What that join costs before its own logic. instr.sh
-- counts it.
--
-- KEYS[1]  a hash of the suppressed layout (docs/data-model.md)
-- ARGV     sup_inc.lua's (ARGV[1] to ARGV[9])
-- Reply: an integer
local ARGV, redis, string = ARGV, redis, string -- as sup_inc.lua: locals
local h = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = ARGV[1] + 0
end
local n = 1
if ARGV[6] ~= '1' then n = ARGV[6] + 0 end
local w, b, soft = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local mk = redis.call('HMGET', h, 'm', 'k')
local us, xs, os, ns, ncs, nds, cs, hcs, fs, fts, kt
if mk[1] then us, xs, os, ns, ncs, nds = string.match(mk[1], '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$') end
if mk[2] then
  if xs == '0' and mk[2] == ARGV[4] .. ' ' .. ARGV[5] .. ' 0 0' then
    cs, hcs, fs, fts, kt = ARGV[4], ARGV[5], '0', '0', ''
  else
    cs, hcs, fs, fts, kt = string.match(mk[2], '^(%d+) (%d+) (%d+) (%-?%d+)([ %d]*)$')
  end
end
if not (ns and cs) then
  redis.call('HSET', h, 'm', '1 0 ' .. now .. ' ' .. now .. ' 1 0', 'k', ARGV[4] .. ' ' .. ARGV[5] .. ' 0 0')
  redis.call('PEXPIRE', h, ARGV[9])
  return 1
end
local newest, used, oldest, ncount, declined, ndec = ns + 0, us + 0, os + 0, ncs + 0, 0, 0
if xs ~= '0' then declined = xs + 0 end
if nds ~= '0' then ndec = nds + 0 end
redis.call('HSET', h, 'm', string.format('%d %s %s %s %d %s', used + n, xs, os, ns, ncount + n, nds))
if ARGV[1] ~= '' then redis.call('PEXPIRE', h, ARGV[9]) end
local remaining = soft - (used + n - declined)
return remaining * 4294967296 + newest + w + b - now + oldest - oldest + ndec - ndec
