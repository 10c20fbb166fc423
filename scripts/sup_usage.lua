-- sup_usage.lua: the function sup_get.lua and sup_set_get.lua share,
-- written once. A script's line "-- include sup_usage.lua" stands for this
-- text (scripts.go sends the script with the text in its place), so it
-- defines one local function and reads no KEYS or ARGV.
--
-- Included by: sup_get.lua, sup_set_get.lua

-- usage returns the accepted and declined units and the soft capacity of
-- the hash h at now, window w and bucket b (0, 0, 0 without a live
-- bucket), or nil and an error (SLUICELAYOUT, SLUICEWINDOW, SLUICESTATE).
-- kpat reads the soft capacity from "k": a single hash's may end in its
-- RetryAfter cursor, a set's in its TTL span t.
local function usage(h, now, w, b, kpat)
  local P = 4294967296
  local sp = w + b -- a bucket is live while now - start < W + B
  -- "m" = "<u> <x> <o> <n> <nc> <nd>", "k" = "<c> <hc> <f> <ft> ..." (sup_inc.lua).
  local mk = redis.call('HMGET', h, 'm', 'k', 'v')
  local us, xs, os, ns, ncs, nds, cs
  if mk[1] then us, xs, os, ns, ncs, nds = string.match(mk[1], '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$') end
  if mk[2] then cs = string.match(mk[2], kpat) end
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
  -- a count no write makes (2^53 or more), written by another client: an
  -- error naming the hash (as sup_inc.lua), never a negative usage; nc is
  -- parsed only when it has the 16 digits such a count takes
  if used >= 9007199254740992 or declined >= 9007199254740992 or #ncs > 15 and ncs + 0 >= 9007199254740992 then
    return nil, 'SLUICESTATE ' .. h .. ' m ' .. mk[1]
  end
  if now - os >= sp then
    -- Expired buckets are still stored: count only the live ones, starting
    -- with the newest (nc, nd in "m"), which is live, in one pass over the
    -- hash (at most 2 (W/B + 1) bucket fields: docs/algorithms.md, Bounded
    -- work). A closed bucket's value is offered * 2^32 + link or -offered
    -- (see sup_inc.lua; a plain count is an earlier layout's); "d<start>"
    -- holds its declined units and lives and dies with it.
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
