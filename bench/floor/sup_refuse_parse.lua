-- sup_refuse_parse.lua: sup_cmds.lua plus the numbers sup_inc.lua parses
-- and formats on an overloaded key's usual refusal (the factor cached, the
-- RetryAfter in the cursor's bucket), with no decision: the clock (Redis
-- TIME or ARGV[1]), W, B, S, H, the cache period and the draw (a cost of
-- 1 is not parsed), "m" and "k" split by the script's patterns, "m"'s six
-- values, the cached factor and its time, the cursor's pattern and four
-- values, and "m" formatted anew with four computed numbers, as a refusal
-- that joins the newest bucket writes it. What that refusal costs before
-- its own logic. instr.sh counts it.
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
local hard, cache, draw = ARGV[5] + 0, ARGV[7] + 0, ARGV[8] + 0
local mk = redis.call('HMGET', h, 'm', 'k')
local us, xs, os, ns, ncs, nds, cs, hcs, fs, fts, kt
if mk[1] then us, xs, os, ns, ncs, nds = string.match(mk[1], '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$') end
if mk[2] then cs, hcs, fs, fts, kt = string.match(mk[2], '^(%d+) (%d+) (%d+) (%-?%d+)([ %d]*)$') end
if not (ns and cs) then
  redis.call('HSET', h, 'm', '1502 1402 ' .. (now - 1000) .. ' ' .. now .. ' 10 9',
    'k', ARGV[4] .. ' ' .. ARGV[5] .. ' 333333 ' .. (now - 50) .. ' 10 90 1 10')
  if ARGV[1] ~= '' then redis.call('PEXPIRE', h, ARGV[9]) end
  return -1
end
local newest, used, oldest, ncount, declined, ndec = ns + 0, us + 0, os + 0, ncs + 0, xs + 0, nds + 0
local f, fat = fs + 0, fts + 0
local a, b2, c, d = string.match(kt, '^ (%d+) (%d+) (%d+) (%d+)$')
local rcs, rcb, rca, rcl = oldest + a, b2 + 0, c + 0, d + 0
redis.call('HSET', h, 'm', string.format('%d %d %s %s %d %d', used + n, declined + n, os, ns, ncount + n, ndec + n))
if ARGV[1] ~= '' then redis.call('PEXPIRE', h, ARGV[9]) end
return -(((f * 2 + rcl - rcl) * 65536 + rcs + w + b - now + rca - rca + rcb - rcb) * 65536 + newest - now + fat - fat
  + soft - soft + hard - hard + cache - cache + draw - draw) - 1
