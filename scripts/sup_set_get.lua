-- sup_set_get.lua: the usage of a suppressed key in each limit of a set
-- (sup_get.lua's reading, once per hash, at one instant). Read-only.
--
-- KEYS[i]  <prefix>:{<key>}:sup:h:<name>, the hash of limit i (fields: see
--          sup_inc.lua; a set's "k" ends in its TTL span t, see
--          sup_set.lua), 1 <= i <= 8
-- ARGV[1]  now in ms; an empty string reads Redis TIME
-- then two values per limit i, from ARGV[2 + 2 (i - 1)]:
--   W      the window in ms
--   B      the bucket in ms
--
-- Reply: {accepted, declined, soft capacity} per limit, flat, over the
--        live buckets; 0, 0, 0 for a hash with no live bucket.

local nk = #KEYS
if nk < 1 or nk > 8 or #ARGV ~= 1 + 2 * nk then
  return redis.error_reply('ERR sup_set_get.lua: ' .. nk .. ' keys and ' .. #ARGV .. ' arguments')
end
local now = tonumber(ARGV[1])
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local P = 4294967296

-- usage returns the accepted and declined units and the soft capacity of
-- the hash h at window w and bucket b.
local function usage(h, w, b)
  local sp = w + b -- a bucket is live while now - start < W + B
  -- "m" = "<u> <x> <o> <n> <nc> <nd>", "k" = "<c> <hc> <f> <ft>" (sup_inc.lua).
  local mk = redis.call('HMGET', h, 'm', 'k', 'v')
  local us, xs, os, ns, ncs, nds, cs
  if mk[1] then us, xs, os, ns, ncs, nds = string.match(mk[1], '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$') end
  if mk[2] then cs = string.match(mk[2], '^(%d+) %d+ %d+ %-?%d+ %d+$') end
  local rec = 's2 ' .. w .. ' ' .. b
  if mk[3] and mk[3] ~= rec then
    -- another record (see sup_inc.lua): another layout is an error,
    -- another window one while the hash is live under its own window
    local rw, rb = string.match(mk[3], '^s2 (%d+) (%d+)$')
    if not rw then return nil, 'SLUICELAYOUT ' .. mk[3] end
    if ns and cs and now - ns < rw + rb and ns - now < rw + rb then return nil, 'SLUICEWINDOW ' .. mk[3] .. ' ' .. rec end
    return 0, 0, 0
  end
  if not ns or not cs or now - ns >= sp or ns - now >= sp then
    return 0, 0, 0
  end
  local used, declined = us + 0, xs + 0
  if now - os >= sp then
    -- Expired buckets are still stored: count only the live ones, starting
    -- with the newest (nc, nd in "m"), which is live, in one pass over the
    -- hash (at most 2 (W/B + 1) bucket fields: docs/algorithms.md, Bounded
    -- work).
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
  return used - declined, declined, cs + 0
end

local reply = {}
for i = 1, nk do
  local a, d, c = usage(KEYS[i], ARGV[2 * i], ARGV[2 * i + 1])
  if not a then return redis.error_reply(d) end
  reply[3 * i - 2], reply[3 * i - 1], reply[3 * i] = a, d, c
end
return reply
