-- abs_inc.lua: one decision of the absolute strategy, the Redis twin of
-- internal/window's State.IncAbsolute (ARGV[4] > 0) and
-- State.IsAllowedAbsolute (ARGV[4] = 0) (fields, record "v" and error
-- replies: docs/data-model.md; "-- == N." lines: bench/floor/sections.sh).
--
-- KEYS[1]  the key's hash, <prefix>:{<escaped key>}:abs:h
-- ARGV[1]  now in ms, or an empty string to read Redis TIME
-- ARGV[2]  W, ARGV[3] B: the window and the bucket in ms
-- ARGV[4]  C, the capacity (a plain decimal, stored as sent); 0 answers
--          IsAllowed with the capacity the key's latest Inc stored
-- ARGV[5]  n, the cost (0 with C = 0); 0 is a peek for one unit, no write
-- ARGV[6]  the PEXPIRE in ms, W + B, set by a write that opens a bucket,
--          and by every write under the caller's clock
-- ARGV[7]  optional, the hybrid's lease (docs/algorithms.md, Hybrid
--          leases): the most units to reserve; an admission then records g,
--          n <= g <= ARGV[7], at most a quarter of the room beyond n
-- ARGV[8]  optional: the start (ms) of the bucket an earlier lease used
-- ARGV[9]  and its unused units, given back first ('0': no release)
-- ARGV[10] optional, with ARGV[7]: D, the most ms a lease's bucket may
--          start after now (a forward-dated lease)
-- ARGV[11] optional, 'writeback': n units a local fallback admitted,
--          recorded whatever the key holds (ARGV[7] to ARGV[10] are 0)
--
-- Reply (internal/redisprov.Decision reads every form):
--   r >= 0: admitted with fewer than 2^21 units remaining:
--     remaining = floor(r / 2^32), reset_after_ms = r mod 2^32;
--   {limit, remaining, reset_after_ms}: any other admission;
--   r < 0: refused, nothing remaining, not never, retry and reset below
--     2^26 ms: v = -r - 1, reset = v mod 2^26, retry = floor(v / 2^26);
--   {outcome (1), allowed (0), limit, remaining, retry_after_ms,
--     reset_after_ms, factor_ppm (0), never}: any other refusal;
--   with ARGV[7] or a write-back: {g, start of the bucket written, now,
--     remaining, reset}.
-- == 1. Arguments =======================================================
if redis.replicate_commands then redis.replicate_commands() end
local ARGV, redis, string = ARGV, redis, string

local h = KEYS[1]
local w, b, c = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local n = 1
if ARGV[5] ~= '1' then n = ARGV[5] + 0 end
local sp = w + b -- a bucket is live while now - start < W + B
-- include now.lua
local fmt = string.format -- fmt('%d', x): tostring prints large numbers in exponent notation

local P = 4294967296 -- 2^32: a closed bucket's value is count * P + link
-- "m": five decimals, or six with z, the newest closed bucket with no unit
local M5 = '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+)$'
local M6 = '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%-?%d+)$'
-- == 2. The release of a lease ==========================================
if ARGV[9] and ARGV[9] ~= '0' then
  local rel = ARGV[9] + 0
  local rv = redis.call('HGET', h, 'm')
  local rc, ru, ro, rn, rnc, rz
  if rv then
    rc, ru, ro, rn, rnc = string.match(rv, M5)
    if not rc then rc, ru, ro, rn, rnc, rz = string.match(rv, M6) end
  end
  local rs = ARGV[8] + 0
  if rn and now - rn < sp and rn - now < sp and now - rs < sp and rs >= ro + 0 then
    local back = 0
    if rs == rn + 0 then
      back = math.min(rel, rnc + 0)
      rnc = rnc - back
    elseif rs < rn + 0 then
      local v = redis.call('HGET', h, ARGV[8])
      if v then
        v = v + 0
        local cnt, link = v, -1
        if v >= P then
          link = v % P
          cnt = (v - link) / P
        elseif v < 0 then
          cnt = -v
        end
        back = math.min(rel, cnt)
        cnt = cnt - back
        if cnt == 0 then
          v = 0
          -- a closed bucket with no unit: z marks the newest such
          if not rz or rs > rz + 0 then rz = ARGV[8] end
        elseif link >= 0 then
          v = cnt * P + link
        elseif v < 0 then
          v = -cnt
        else
          v = cnt
        end
        redis.call('HSET', h, ARGV[8], fmt('%d', v))
      end
    end
    if back > 0 then
      local rm = fmt('%s %d %s %s %d', rc, ru - back, ro, rn, rnc)
      if rz then rm = rm .. ' ' .. rz end
      redis.call('HSET', h, 'm', rm)
    end
  end
end
-- == 3. Decode: the meta field and the record ===========================
local mr = redis.call('HMGET', h, 'm', 'v')
local mv, vs = mr[1], mr[2]
local rec = 'a2 ' .. ARGV[2] .. ' ' .. ARGV[3] -- the record this call writes
local cs, us, os, ns, ncs, zs -- the values as stored; zs nil without z
if mv then
  cs, us, os, ns, ncs = string.match(mv, M5)
  if not cs then cs, us, os, ns, ncs, zs = string.match(mv, M6) end
end
if vs and vs ~= rec then
  -- Another record: another layout is an error; another window is one
  -- while the hash is live under its own window, and absent after.
  local rw, rb = string.match(vs, '^a2 (%d+) (%d+)$')
  if not rw then return redis.error_reply('SLUICELAYOUT ' .. vs) end
  if ns and now - ns < rw + rb then
    return redis.error_reply('SLUICEWINDOW ' .. vs .. ' ' .. rec)
  end
  ns = nil
end
local live, stale, fresh = false, false, false
local used, oldest, newest, ncount = 0, 0, 0, 0
if ns then
  newest = ns + 0
  if now - newest >= sp or newest - now >= sp then
    -- dead, or written W + B or more ahead by a clock that stepped back
    stale = true
  else
    live = true
    used, oldest, ncount = us + 0, newest, ncs + 0
    if os ~= ns then oldest = os + 0 end -- one bucket: o = n, parsed once
    -- 2^53 or more (inexact in a double): another client's count
    if used >= 9007199254740992 or ncount >= 9007199254740992 then
      return redis.error_reply('SLUICESTATE ' .. h .. ' m ' .. mv)
    end
    fresh = now - oldest < sp -- no stored bucket has died
  end
elseif mv then
  stale = true -- "m" unreadable or another window's dead state: absent
end

if c == 0 then
  if not live then return {0, 0, 0} end
  c = cs + 0
end
local moved = cs ~= ARGV[4] -- the capacity changed
-- == 4. Expire: the buckets that died ===================================
-- Drop the buckets that died, oldest first along the links, up to LINKS;
-- a missing or broken link, or more, leaves them to the scan.
-- d1: the first dead bucket's field; dead: all of them from the second on,
-- or the scan's (the usual call drops one and makes no table).
local LINKS = 8
local d1, dead, ofield = nil, nil, os -- ofield: the oldest start as a string, when known
if live and not fresh then
  local nd = 0
  fresh = true
  while now - oldest >= sp do
    if nd >= LINKS then fresh = false break end
    if not ofield then ofield = fmt('%d', oldest) end
    local v = redis.call('HGET', h, ofield)
    if v then v = v + 0 end
    local link = v and v % P
    if not v or v < P or link < 1 then fresh = false break end
    used = used - (v - link) / P
    nd = nd + 1
    if nd == 1 then d1 = ofield elseif nd == 2 then dead = {d1, ofield} else dead[nd] = ofield end
    oldest = oldest + link
    ofield = nil
  end
  -- the links must end at the newest bucket with its count left
  if fresh and (oldest > newest or oldest == newest and used ~= ncount) then fresh = false end
end
-- == 5. Decide, with the RetryAfter and the scan it may need ============
local cost = n
if cost < 1 then cost = 1 end
local never = cost > c

-- A refusal's RetryAfter: the oldest bucket alone often frees enough (one
-- HGET, no scan); rdone false leaves it to the walk at the end.
local retry, rdone = 0, true
if live and fresh and not never and used + cost > c then
  local first = ncount
  if oldest ~= newest and used + cost == c + 1 and (not zs or oldest > zs + 0) then
    -- The oldest bucket is closed and holds a unit (no z at or after it),
    -- and the call lacks one unit: its death is the answer, unread.
    first = 1
  elseif oldest ~= newest then
    if not ofield then ofield = fmt('%d', oldest) end
    local v = redis.call('HGET', h, ofield)
    v = v and v + 0 or 0
    if v >= P then first = (v - v % P) / P elseif v < 0 then first = -v else first = v end
  end
  if first > 0 and (used - first + cost <= c or first >= used) then
    retry = oldest + sp - now
  else
    rdone = false
  end
end

-- scan: abs_scan.lua's scanBuckets, made only for a call that needs it.
local scan, starts, counts, k
if live and (not fresh or not rdone) then
  -- include abs_scan.lua
  scan = function()
    local sc
    sc, used, dead, oldest = scanBuckets(h, now, sp, newest, ncount)
    starts, counts, k = sc[1], sc[2], sc[3]
    ofield = fmt('%d', oldest)
  end
  if not fresh then scan() end
end

local allowed = (not never) and used + cost <= c
if not allowed and ARGV[11] == 'writeback' then allowed = true end
-- == 6. Write: the lease, the bucket, the meta ==========================
local lease = ARGV[7]
local ns5 = ARGV[5]
-- at: now, or later for a forward-dated lease; starts stay increasing and
-- B apart.
local at = now
if lease and allowed and n > 0 then
  local room = c - used - n
  local g = math.min(lease + 0, n + math.floor((room + 3) / 4))
  if g > n then
    n = g
    ns5 = fmt('%d', g)
    if ARGV[10] and ARGV[10] ~= '0' then
      local d = math.floor(ARGV[10] * math.min(c, 1.5 * c - 2 * (used + n)) / c)
      if d > 0 then at = now + d end
    end
  end
end

if n > 0 then
  local wrote, opened = false, false
  local zt -- z as the write stores it, kept while its bucket may be stored
  if zs and oldest <= zs + 0 then zt = ' ' .. zs end
  if stale then
    redis.call('DEL', h)
    wrote = true
  elseif d1 and not dead then
    redis.call('HDEL', h, d1) -- the usual case, without unpack
    wrote = true
  elseif dead and #dead > 0 then
    for i = 1, #dead, 1000 do
      redis.call('HDEL', h, unpack(dead, i, math.min(i + 999, #dead)))
    end
    wrote = true
  end
  if allowed then
    used = used + n
    if not live then
      local s0 = fmt('%d', at)
      redis.call('HSET', h, 'm', ARGV[4] .. ' ' .. ns5 .. ' ' .. s0 .. ' ' .. s0 .. ' ' .. ns5, 'v', rec)
      newest, live, opened, vs = at, true, true, rec
    elseif at - newest < b then
      local mm = ARGV[4] .. fmt(' %d ', used) .. (ofield or fmt('%d', oldest)) .. ' ' .. ns .. fmt(' %d', ncount + n)
      if zt then mm = mm .. zt end
      redis.call('HSET', h, 'm', mm)
    else
      -- Open a bucket: the newest becomes a field, count * P + link (a
      -- count of 0, left by a lease's release, is a plain 0).
      local closed = -ncount
      if ncount > 0 and ncount < 2097152 and at - newest < P then closed = ncount * P + (at - newest) end
      if ncount == 0 then zt = ' ' .. ns end -- it is the newest closed bucket with no unit
      local mm = ARGV[4] .. fmt(' %d %d %d ', used, oldest, at) .. ns5
      if zt then mm = mm .. zt end
      redis.call('HSET', h, ns, fmt('%d', closed), 'm', mm)
      newest, opened = at, true
    end
    wrote = true
  elseif live and (d1 or dead or moved) then
    -- the latest capacity wins, even on a refusal
    local mm = ARGV[4] .. fmt(' %d ', used) .. (ofield or fmt('%d', oldest)) .. ' ' .. ns .. fmt(' %d', ncount)
    if zt then mm = mm .. zt end
    redis.call('HSET', h, 'm', mm)
    wrote = true
  end
  -- a live hash written before the record gets it with its first write
  if wrote and live and vs ~= rec then redis.call('HSET', h, 'v', rec) end
  -- The key dies W + B after its newest bucket opened (perhaps after now).
  if opened or wrote and live and ARGV[1] ~= '' then
    if newest > now then
      redis.call('PEXPIRE', h, fmt('%d', ARGV[6] + newest - now))
    else
      redis.call('PEXPIRE', h, ARGV[6])
    end
  end
end
-- == 7. Reply ===========================================================
local reset = 0
if live then reset = newest + sp - now end

if allowed then
  local remaining = c - used
  if lease and n > 0 then return {n, newest, now, remaining, reset} end
  if ARGV[4] ~= '0' and remaining < 2097152 and reset < P then
    return remaining * 4294967296 + reset
  end
  return {c, remaining, reset}
end

local remaining = c - used
if remaining < 0 then remaining = 0 end
if not never and (not rdone or not fresh) then
  if not starts then scan() end
  if starts then
    local freed = 0
    for i = 1, k do
      local cnt = counts[i]
      if cnt ~= 0 then
        freed = freed + cnt
        if used - freed + cost <= c or freed >= used then
          retry = starts[i] + sp - now
          break
        end
      end
    end
  end
end
if remaining == 0 and not never and ARGV[4] ~= '0' and retry < 67108864 and reset < 67108864 then
  -- a refusal of a saturated key
  return -(retry * 67108864 + reset) - 1
end
local nv = 0
if never then nv = 1 end
return {1, 0, c, remaining, retry, reset, 0, nv}
