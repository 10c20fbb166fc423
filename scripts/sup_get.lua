-- sup_get.lua: the usage of a suppressed key. Read-only.
--
-- KEYS[1]  <prefix>:{<key>}:sup:h, the key's hash (fields: see sup_inc.lua)
-- ARGV[1]  now in ms; an empty string reads Redis TIME
-- ARGV[2]  W, the window in ms
-- ARGV[3]  B, the bucket in ms
--
-- Reply: {accepted, declined, soft capacity} over the live buckets;
--        {0, 0, 0} for a key with no live bucket.

local h = KEYS[1]
local now = tonumber(ARGV[1])
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local w = tonumber(ARGV[2])
local sp = w + tonumber(ARGV[3]) -- a bucket is live while now - start < W + B

-- "m" = "<u> <x> <o> <n> <nc> <nd>", "k" = "<c> <hc> <f> <ft>" and, on a
-- single hash, perhaps the RetryAfter cursor after them (sup_inc.lua).
local mk = redis.call('HMGET', h, 'm', 'k', 'v')
local us, xs, os, ns, ncs, nds, cs
if mk[1] then us, xs, os, ns, ncs, nds = string.match(mk[1], '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$') end
if mk[2] then cs = string.match(mk[2], '^(%d+) %d+ %d+ %-?%d+[ %d]*$') end
if mk[3] and mk[3] ~= 's2 ' .. ARGV[2] .. ' ' .. ARGV[3] then
  -- another record (see sup_inc.lua): another layout is an error, another
  -- window one while the hash is live under its own window
  local rw, rb = string.match(mk[3], '^s2 (%d+) (%d+)$')
  if not rw then return redis.error_reply('SLUICELAYOUT ' .. mk[3]) end
  if ns and cs and now - ns < rw + rb and ns - now < rw + rb then
    return redis.error_reply('SLUICEWINDOW ' .. mk[3] .. ' s2 ' .. ARGV[2] .. ' ' .. ARGV[3])
  end
  return {0, 0, 0}
end
if not ns or not cs or now - ns >= sp or ns - now >= sp then
  return {0, 0, 0}
end
local used, declined = us + 0, xs + 0
-- a count no write makes (2^53 or more), written by another client: an
-- error naming the hash (as sup_inc.lua), never a negative usage
if used >= 9007199254740992 or ncs + 0 >= 9007199254740992 or declined >= 9007199254740992 then
  return redis.error_reply('SLUICESTATE ' .. h .. ' m ' .. mk[1])
end
local P = 4294967296

if now - os >= sp then
  -- Expired buckets are still stored: count only the live ones, starting
  -- with the newest (nc, nd in "m"), which is live, in one pass over the hash
  -- (at most 2 (W/B + 1) bucket fields: docs/algorithms.md, Bounded work).
  -- A closed bucket's value is offered * 2^32 + link or -offered (see
  -- sup_inc.lua; a plain count is an earlier layout's); "d<start>" holds
  -- its declined units and lives and dies with it.
  used, declined = ncs + 0, nds + 0
  -- more fields than any record holds (another client's): an error
  -- naming the hash, not a read that holds Redis for every key
  local nf = redis.call('HLEN', h)
  if nf > 4096 then error({err = 'SLUICEFIELDS ' .. h .. ' ' .. nf}) end
  local all = redis.call('HGETALL', h)
  for i = 1, #all, 2 do
    local f = all[i]
    local c = string.byte(f, 1)
    if c >= 48 and c <= 57 or c == 45 then
      if now - f < sp then
        local v = all[i + 1] + 0
        if v >= P then
          v = (v - v % P) / P
        elseif v < 0 then
          v = -v
        end
        used = used + v
      end
    elseif c == 100 and now - string.sub(f, 2) < sp then
      declined = declined + all[i + 1]
    end
  end
end
return {used - declined, declined, cs + 0}
