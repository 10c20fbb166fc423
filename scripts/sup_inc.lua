-- sup_inc.lua: one Inc of the suppressed strategy (docs/algorithms.md,
-- Suppressed strategy), the Redis twin of internal/window's
-- State.IncSuppressed. The hash (meta fields "m" and "k", the RetryAfter
-- cursor at the end of "k"), its record "v" ("s2 <W> <B>") and the error
-- replies SLUICEWINDOW and SLUICELAYOUT: docs/data-model.md. How the
-- scripts are written for cost: docs/benchmarks.md, Instructions per call.
--
-- KEYS[1]  <prefix>:{<key>}:sup:h, the key's hash
-- ARGV[1]  now in ms; an empty string reads Redis TIME
-- ARGV[2]  W, the window in ms
-- ARGV[3]  B, the bucket in ms
-- ARGV[4]  S, the soft capacity
-- ARGV[5]  H, the hard capacity (H >= S)
-- ARGV[6]  n, the cost; 0 is a peek for one unit that writes nothing; at
--          most H + 1 (window.RecordedCost)
-- ARGV[7]  the suppression cache period in ms; 0 computes the factor on
--          every call
-- ARGV[8]  the call's random draw in ppm, in [0, 999999]
-- ARGV[9]  the PEXPIRE in ms, W + B, set by a write that opens a bucket,
--          and by every write under the caller's clock
-- ARGV[10] optional, the hybrid's call (docs/algorithms.md, Hybrid leases):
--          the most units to reserve, n included, 0 for none; the call
--          (n = 0: a renewal) records e more accepted units, e at most
--          ARGV[10] - n and a quarter of the room left below H
-- ARGV[11] with ARGV[12]: the start (ms) of the bucket an earlier lease
-- ARGV[12] used and its unused units, given back first (0: no release)
-- ARGV[13] units the instance declined from memory since its last call,
--          recorded as offered and declined (at least one)
-- ARGV[14] optional, D: the most ms a lease's bucket may start after now
--          (a forward-dated lease)
-- ARGV[15] optional, the mode: 'writeback' is the failover's write-back
--          (internal/redisprov): n units a local fallback admitted, recorded
--          as accepted whatever the key holds (ARGV[10] to ARGV[14] are
--          then 0 and ignored: no lease, no hybrid reply)
-- ARGV[4] and ARGV[5] are stored as sent: plain decimals.
--
-- Reply (internal/redisprov.Decision reads every form):
--   an integer r >= 0: admitted at or below S with fewer than 2^21
--     remaining: remaining = floor(r / 2^32), reset = r mod 2^32;
--   {limit, remaining, reset after ms}: such an admission, more remaining;
--   an integer r < 0: suppressed (outcome 2), nothing remaining, not never,
--     retry and reset below 2^16 ms: v = -r - 1, reset = v mod 2^16,
--     retry = floor(v / 2^16) mod 2^16, allowed = floor(v / 2^32) mod 2,
--     factor ppm = floor(v / 2^33);
--   otherwise {outcome, allowed, limit, remaining, retry after ms,
--     reset after ms, factor ppm, never}; limit is S.
--   With ARGV[10]: always the eight values, then g (the accepted units the
--     call recorded), the start of the bucket written, now, accepted,
--     observed, observed in the last min(W, 1 s) (0 when accepted is below
--     S), ms until the oldest live bucket dies, when the factor was
--     computed (0: none).
--
-- Sections, in the order a call runs them (bench/floor/sections.sh cuts
-- at each "-- == N." line): 1. arguments, 2. the hybrid's arguments and
-- lease release, 3. decode, 4. expire, 5. decide, 6. RetryAfter from the
-- cursor, 7. the slow paths (scan, factor, RetryAfter walk), 8. write,
-- 9. reply.
-- == 1. Arguments =======================================================
if redis.replicate_commands then redis.replicate_commands() end
-- globals as locals
local ARGV, redis, string = ARGV, redis, string

local PPM = 1000000
local MAXD = 4503599627370496 -- 2^52: window.MaxDeclined
local h = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  local usec = t[2] + 0 -- whole ms without a call of math.floor
  now = t[1] * 1000 + (usec - usec % 1000) / 1000
else
  now = ARGV[1] + 0
end
-- A cost of 1 (nearly every call) is known without parsing it.
local n = 1
if ARGV[6] ~= '1' then n = ARGV[6] + 0 end
local w, b, soft = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local sp = w + b -- a bucket is live while now - start < W + B
-- H, the cache period and the draw, parsed only by a call that may need
-- them (below): an admission below the soft capacity does not.
local hard, cache, draw, wb
local ttl = ARGV[9]
local write = n > 0
local fmt = string.format -- fmt('%d', x): tostring prints large numbers in exponent notation

-- == 2. The hybrid's arguments and the release of a lease ===============
-- The hybrid provider's arguments (ARGV[10] to ARGV[13], see the header):
-- the release of an earlier lease happens first, before the hash is read,
-- so that the call decides on what is left. hext (set before the record
-- below) is the lease beyond n.
local hyb = ARGV[10] ~= nil and ARGV[15] ~= 'writeback'
local hwant, hpush, hext = 0, 0, 0
if hyb then
  hwant, hpush = ARGV[10] + 0, ARGV[13] + 0
  hard, cache, draw, wb = ARGV[5] + 0, ARGV[7] + 0, ARGV[8] + 0, false
  if hwant > 0 or hpush > 0 then write = true end
  local rel, HP = ARGV[12] + 0, 4294967296
  local mk0 = rel > 0 and redis.call('HMGET', h, 'm', 'k')
  local u0, x0s, o0, n0, nc0, nd0, k0
  if mk0 and mk0[1] then u0, x0s, o0, n0, nc0, nd0 = string.match(mk0[1], '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$') end
  -- k0: "k" without its cursor, when it holds one
  if mk0 and mk0[2] then k0 = string.match(mk0[2], '^(%d+ %d+ %d+ %-?%d+) ') end
  local rs = ARGV[11] + 0
  if u0 and now - (n0 + 0) < sp and n0 - now < sp and now - rs < sp and rs >= o0 + 0 then
    local back, field = 0, nil
    if rs == n0 + 0 then
      back = math.min(rel, nc0 - nd0)
      nc0 = nc0 - back
    elseif rs < n0 + 0 then
      local v = redis.call('HMGET', h, ARGV[11], 'd' .. ARGV[11])
      local val = tonumber(v[1])
      if val then
        local cnt, link = val, nil
        if val >= HP then
          link = val % HP
          cnt = (val - link) / HP
        elseif val < 0 then
          cnt = -val
        end
        back = math.max(0, math.min(rel, cnt - (tonumber(v[2]) or 0)))
        cnt = cnt - back
        -- a linked bucket left with no unit is a plain 0 (no link)
        if link and cnt > 0 then field = fmt('%d', cnt * HP + link)
        elseif val < 0 and cnt > 0 then field = fmt('%d', -cnt)
        else field = fmt('%d', cnt) end
      end
    end
    if back > 0 then
      local mv0 = fmt('%d %s %s %s %d %s', u0 - back, x0s, o0, n0, nc0, nd0)
      -- the RetryAfter cursor's counts changed: "k" loses it
      local kx = {}
      if field then kx[1], kx[2] = ARGV[11], field end
      if k0 then kx[#kx + 1], kx[#kx + 2] = 'k', k0 end
      redis.call('HSET', h, 'm', mv0, unpack(kx))
    end
  end
end

-- == 3. Decode: the meta fields and the record ==========================
-- The meta fields, as stored (strings): "m" = "<u> <x> <o> <n> <nc> <nd>",
-- "k" = "<c> <hc> <f> <ft>". A hash without both (an earlier layout, or
-- damaged) is absent.
local mk = redis.call('HMGET', h, 'm', 'k', 'v')
-- vs: the record "v" as stored; vrec: the one this call writes,
-- "s<layout> <W> <B>" (see the header)
local vs, vrec = mk[3], 's2 ' .. ARGV[2] .. ' ' .. ARGV[3]
-- kt: the rest of "k", the RetryAfter cursor (" <rd> <rb> <ra> <rl>") or
-- an empty string: one pattern reads both forms.
local us, xs, os, ns, ncs, nds, cs, hcs, fs, fts, kt
if mk[1] then us, xs, os, ns, ncs, nds = string.match(mk[1], '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$') end
if mk[2] then
  -- A key with no declined unit usually holds "k" as its first write made
  -- it, "<S> <H> 0 0" (no factor cached, no cursor): compared whole, it
  -- needs no pattern (ARGV[4] and ARGV[5] are plain decimals: the header).
  if xs == '0' and mk[2] == ARGV[4] .. ' ' .. ARGV[5] .. ' 0 0' then
    cs, hcs, fs, fts, kt = ARGV[4], ARGV[5], '0', '0', ''
  else
    cs, hcs, fs, fts, kt = string.match(mk[2], '^(%d+) (%d+) (%d+) (%-?%d+)([ %d]*)$')
  end
end
local used, declined, oldest, newest, ncount, ndec = 0, 0, nil, nil, 0, 0
local live = false
if ns and cs then
  newest = ns + 0
  -- dead once the newest bucket is W + B old, or when it starts W + B or
  -- more ahead of now (a clock that stepped back: abs_inc.lua)
  live = now - newest < sp and newest - now < sp
end
if vs and vs ~= vrec then
  -- Another record: another layout is an error; another window is one
  -- while the hash is live under its own window, and absent after.
  local rw, rb = string.match(vs, '^s2 (%d+) (%d+)$')
  if not rw then return redis.error_reply('SLUICELAYOUT ' .. vs) end
  if ns and cs and now - ns < rw + rb then
    return redis.error_reply('SLUICEWINDOW ' .. vs .. ' ' .. vrec)
  end
  live = false
end
if live then
  used, oldest, ncount = us + 0, os + 0, ncs + 0
  -- no declined unit (every key below its soft capacity): nothing to parse
  if xs ~= '0' then declined = xs + 0 end
  if nds ~= '0' then ndec = nds + 0 end
  -- a count no write makes (2^53 or more: inexact in a double), written
  -- by another client: an error naming the hash, never a decision
  if used >= 9007199254740992 or ncount >= 9007199254740992 or declined >= 9007199254740992 then
    return redis.error_reply('SLUICESTATE ' .. h .. ' m ' .. mk[1])
  end
end
local ostart = oldest -- "o" as stored, which the links below may move
-- the capacities to store differ from the stored ones
local moved = cs ~= ARGV[4] or hcs ~= ARGV[5]
local P = 4294967296 -- 2^32: a closed bucket's value is offered * P + link
local expired = false -- dead buckets were found: "o" (and "x") must be rewritten
-- After a scan (k set), the live buckets oldest first, in parallel arrays:
-- starts, offered units and declined units.
local k, bs, bo, bd

-- A key without a live bucket is absent: its capacities and cached factor
-- are forgotten.
-- A write replaces the hash whole: what it holds is dead, damaged or of an
-- earlier layout, whose bucket fields must not be read as this one's.
if not live then
  if write then redis.call('DEL', h) end
  vs = false -- a write stores the record anew
  used, declined, oldest, newest, moved = 0, 0, nil, nil, true
  ncount, ndec, kt = 0, 0, ''
end

-- == 4. Expire: the buckets that died ===================================
-- Expire along the links: drop the buckets that died since the last write,
-- oldest first, one HMGET (offered and declined) each, for up to 8 of them.
-- A missing or broken link, or more dead buckets, leaves the call to scan
-- below (linked false).
local linked, gone = true, nil -- gone: the fields of dead buckets
-- deadAcc: the accepted units of the dead buckets the links walked past
-- (to move the RetryAfter cursor's rb along); x0: "x" as stored.
local deadAcc, x0 = 0, declined
if live and now - oldest >= sp then
  expired, gone = true, {}
  -- f: the oldest start as a string, formatted only for a further step
  local f, walked = os, 0
  while now - oldest >= sp do
    if walked >= 8 then linked = false break end
    walked = walked + 1
    if not f then f = fmt('%d', oldest) end
    local df = 'd' .. f
    local v = redis.call('HMGET', h, f, df)
    local off = v[1] and v[1] + 0
    local link = off and off % P
    if not off or off < P or link < 1 then linked = false break end
    used = used - (off - link) / P
    deadAcc = deadAcc + (off - link) / P
    gone[#gone + 1] = f
    if v[2] then
      declined = declined - v[2]
      deadAcc = deadAcc - v[2]
      gone[#gone + 1] = df
    end
    oldest = oldest + link
    f = nil
  end
  -- the links must end at the newest bucket with its counts left
  if linked and (oldest > newest or oldest == newest and (used ~= ncount or declined ~= ndec)) then
    linked = false
  end
end

-- == 5. Decide ==========================================================
local cost = n
if cost < 1 then cost = 1 end

-- The hybrid's declines (ARGV[13]) count as observed for this call's
-- factor, as if recorded before it (they add to used and declined alike,
-- so the accepted units are unchanged); the record below adds them to the
-- bucket. Like a refusal's units, at most MAXD - declined of them and at
-- least one are recorded, so that the totals stay exact integers.
if hyb then
  if hpush > 0 and declined + hpush > MAXD then
    hpush = MAXD - declined
    if hpush < 1 then hpush = 1 end
  end
  used, declined = used + hpush, declined + hpush
end

-- Decide without a helper where the call allows it: with the links
-- followed (the totals are exact), below the soft capacity, above the hard
-- one, or between them with the factor cached. decided false leaves the
-- decision to the helpers below.
-- never (cost > H) is false where H is not parsed: there cost <= forecast
-- <= S <= H (the accepted units, used - declined, are never negative).
local forecast = used - declined + cost
local outcome, allowed, f, computed = 0, true, 0, false
local decided, never = false, false
if not hyb and (not linked or forecast > soft) then
  hard, cache, draw, wb = ARGV[5] + 0, ARGV[7] + 0, ARGV[8] + 0, ARGV[15] == 'writeback'
end
if hard then never = cost > hard end
if linked then
  if forecast <= soft then
    decided = true
  elseif forecast > hard then
    -- refused, but for the write-back (wb, see below)
    outcome, allowed, f, decided = 2, wb, PPM, true
  elseif live and cache > 0 then
    local fat = fts + 0 -- ft 0: none cached
    if fat > 0 and now - fat < cache then
      f = fs + 0
      outcome, allowed, decided = 2, draw >= f or wb, true
    end
  end
end

-- == 6. RetryAfter from the cursor ======================================
-- The RetryAfter cursor, the rest of "k" (kt; docs/data-model.md), parsed
-- only by a refusal's RetryAfter, a call the helpers must decide, or a
-- write that expires buckets (which moves its rb along); only a key with
-- declined units ("x" > 0) can hold one. It is used only if the links
-- expired the dead buckets and while rs = o + rd is live. rstate: true
-- when rcs, rcb, rca, rcl hold it (rcb less the dead buckets' accepted
-- units); rraw: kt when it was parsed and held four decimals.
local rstate, rraw, rcs, rcb, rca, rcl = false, nil, 0, 0, 0, 0
if x0 > 0 and kt ~= '' and linked and live and (write and expired or not decided or not allowed and not never) then
  local a, b2, c, d = string.match(kt, '^ (%d+) (%d+) (%d+) (%d+)$')
  if a then
    rraw = kt
    rcs, rcb = ostart + a, b2 - deadAcc
    if rcs >= oldest and rcs <= newest and rcb >= 0 then
      rstate, rca, rcl = true, c + 0, d + 0
    end
  end
end

-- RetryAfter (before the record: a refusal records only declined units,
-- so the accepted units it reads are those after the call too): from the
-- cursor alone when its bucket is known and holds the answer, which is the
-- usual refusal of an overloaded key; else by retryAfter below. pS, pB,
-- pA, pL: the cursor a RetryAfter ended on (pS nil: none).
local retry, rdone = 0, true
local pS, pB, pA, pL
if decided and not allowed and not never then
  local held = used - declined
  local target = held + cost - soft
  if held < target then target = held end
  if target > 0 then
    rdone = false
    if rstate and rcb < target then
      local ra, rl = rca, rcl
      if rcs == newest then ra, rl = ncount - ndec, 0 end
      if (rl ~= 0 or rcs == newest) and target <= rcb + ra then
        retry, rdone = rcs + sp - now, true
        pS, pB, pA, pL = rcs, rcb, ra, rl
      end
    end
  end
end

-- == 7. The slow paths: scan, factor, RetryAfter walk ===================
-- The helpers below are made only for a call that must scan (a missing or
-- broken link), compute the factor, or walk buckets for its RetryAfter.
if not decided or not rdone then
  local scan, factor, retryAfter
  -- scan reads the whole hash (sup_scan.lua's scanBuckets) and sets k,
  -- bs, bo, bd to its live buckets, oldest first; the newest, kept in meta
  -- fields, is the last. It returns the fields of the dead buckets and the
  -- sums of the live buckets' offered and declined units.
  -- include sup_scan.lua
  scan = function()
    local dead, su, sd
    dead, su, sd, k, bs, bo, bd = scanBuckets(h, now, sp, newest, ncount, ndec)
    return dead, su, sd
  end

  -- factor returns the suppression factor in ppm and whether it was
  -- computed (rather than read from the cache): 1 - S*R / max(observed*R,
  -- recent*W) with R = min(W, 1000), recent the units offered in the last
  -- R ms, in doubles in the same order as window.State.Factor, rounded to
  -- the nearest ppm and clamped to [0, PPM].
  factor = function()
    if live and cache > 0 then
      local fppm, fat = fs + 0, fts + 0
      if fat > 0 and now - fat < cache then return fppm, false end -- ft 0: none
    end
    local r = math.min(w, 1000)
    local recent = 0
    if live then
      if now - oldest < r then
        recent = used
      elseif now - newest < r then
        -- Without a scan, and when at most 8 buckets can start at or
        -- before now - R, recent is the total less those buckets' offered
        -- units, read along the links from the oldest, one HGET each
        -- (hpush, in used but in no bucket yet, is taken out too). A
        -- missing or broken link leaves it to the scan.
        local walked = false
        if not k and now - r - oldest < 8 * b then
          local s, old = oldest, 0
          walked = true
          for _ = 1, 8 do
            if now - s < r then break end
            local off = tonumber(redis.call('HGET', h, fmt('%d', s)))
            if not off or off < P or off % P < 1 then walked = false break end
            old = old + (off - off % P) / P
            s = s + off % P
          end
          if walked and now - s < r and s <= newest then
            recent = used - hpush - old
          else
            walked = false
          end
        end
        if not walked then
          if not k then scan() end
          for i = k, 1, -1 do
            if now - bs[i] >= r then break end
            recent = recent + bo[i]
          end
        end
      end
    end
    local mx = math.max(used * r, recent * w)
    if mx <= 0 then return 0, true end
    local f = 1 - soft * r / mx
    local ppm = math.floor(f * PPM + 0.5)
    return math.min(math.max(ppm, 0), PPM), true
  end

  -- retryAfter returns when enough accepted units will have expired for
  -- cost to fit: the start + W + B of the first live bucket, oldest
  -- first, at which the accepted units of it and the older ones reach
  -- target = min(held + cost - cap, held) (window.State.RetryAfter's walk:
  -- held - freed + cost <= cap or freed >= held). On a key without a scan
  -- it starts from the cursor (in "k") when the answer is not before it, else
  -- from the oldest bucket, and steps forward along the links, one HMGET
  -- per bucket it does not know, for up to 8 buckets; then it scans. It
  -- leaves the cursor it ends on in pS..pL.
  retryAfter = function(held, cap)
    if not live then return 0 end
    local target = math.min(held + cost - cap, held)
    if target <= 0 then return 0 end
    if not k then
      local rs, rb, ra, rl = oldest, 0, nil, nil
      if rstate and rcb < target then rs, rb, ra, rl = rcs, rcb, rca, rcl end
      for _ = 1, 8 do
        if rs == newest then
          ra, rl = ncount - ndec, 0
        elseif not ra or rl == 0 then -- not known: read the bucket
          local fl = fmt('%d', rs)
          local v = redis.call('HMGET', h, fl, 'd' .. fl)
          local off = tonumber(v[1])
          if not off or off < P or off % P < 1 then break end -- no link: scan
          rl = off % P
          ra = (off - rl) / P - (tonumber(v[2]) or 0)
        end
        if target <= rb + ra then
          pS, pB, pA, pL = rs, rb, ra, rl
          return rs + sp - now
        end
        if rs == newest then break end -- the totals disagree with the buckets: scan
        rs, rb, ra, rl = rs + rl, rb + ra, nil, nil
        if rs > newest then break end
      end
      scan() -- skips the dead buckets a peek leaves stored
    end
    local freed = 0
    for i = 1, k do
      local u = bo[i] - bd[i]
      if u ~= 0 then
        freed = freed + u
        if freed >= target then
          local rl = 0
          if i < k then rl = bs[i + 1] - bs[i] end
          pS, pB, pA, pL = bs[i], freed - u, u, rl
          return bs[i] + sp - now
        end
      end
    end
    return 0
  end

  -- Expire by a scan where the links could not: a bucket is live while
  -- now - start < W + B. The cursor cannot follow a scan: a refusal below
  -- sets a new one.
  if not linked then
    gone, used, declined = scan()
    if hyb then used, declined = used + hpush, declined + hpush end
    oldest = bs[1]
  end

  if not decided then
    forecast = used - declined + cost
    outcome, allowed, f, computed = 0, true, 0, false
    if forecast <= soft then
      -- below the soft capacity: admitted, factor 0
    elseif forecast > hard then
      outcome, allowed, f = 2, wb, PPM
    else
      outcome = 2
      f, computed = factor()
      allowed = draw >= f or wb
    end
    rdone = allowed or never
  end
  if not rdone then retry = retryAfter(used - declined, soft) end
end
-- == 8. Write: dead fields, the lease, the bucket, the meta =============
-- The write-back (wb, the mode ARGV[15]) is admitted by the decisions
-- above S, which alone read it. Its units were admitted, so they are
-- accepted whatever the key holds.
if write and gone then
  if #gone == 1 then
    redis.call('HDEL', h, gone[1]) -- the usual case, without unpack
  else
    for i = 1, #gone, 1000 do
      redis.call('HDEL', h, unpack(gone, i, math.min(i + 999, #gone)))
    end
  end
end

-- The hybrid's lease (ARGV[10]): the call reserves hext accepted units
-- beside its n, at most ARGV[10] - n and a quarter of the room left below
-- H (rounded up), whether n was admitted or not (a refusal by the draw
-- leaves room for the instance's next decisions, which draw in memory).
if hyb and hwant > n and not never then
  local room = hard - (used - declined)
  if allowed then room = room - n end
  hext = math.max(0, math.min(hwant - n, math.floor((room + 3) / 4)))
end

-- Record: join the newest bucket when at - newest < B, else open one at
-- at (no field of that name can exist: every start is <= newest < at).
if write then
  local pn, pacc = newest, ncount - ndec -- the newest bucket before the call
  -- rec: the units recorded; a refusal records them all as declined, at
  -- most MAXD - declined of them and at least one, so that the totals stay
  -- exact integers (window.MaxDeclined).
  local rec, dec = n, 0
  if not allowed then
    local room = MAXD - declined
    if room < 1 then room = 1 end
    if room < n then rec = room end
    dec = rec
  end
  if hyb then -- the hybrid's lease and declines (already in the totals)
    rec, dec = rec + hext + hpush, dec + hpush
    used, declined = used - hpush, declined - hpush
  end
  -- at: the instant the write files its units under: now, or now + the
  -- offset of a forward-dated lease (ARGV[14]); starts stay increasing
  -- and B apart.
  local at = now
  if hext > 0 and ARGV[14] and ARGV[14] ~= '0' then
    local a = used - declined + rec - dec
    local d = math.floor(ARGV[14] * math.min(soft, 1.5 * soft - 2 * a) / soft)
    if d > 0 then at = now + d end
  end
  local joins = live and at - newest < b
  local start = at
  if joins then start = newest end
  if k then
    if joins then
      bo[k], bd[k] = bo[k] + rec, bd[k] + dec
    else
      k = k + 1
      bs[k], bo[k], bd[k] = start, rec, dec
    end
  end
  used = used + rec
  declined = declined + dec
  local writef = computed and cache > 0
  -- args: the HSET, made only when the call writes more than "m".
  local args
  if joins then
    ncount, ndec = ncount + rec, ndec + dec
  else
    args = {}
    if live then
      -- The newest bucket so far becomes ordinary fields: its offered
      -- units with the link to the new bucket, its declined units as
      -- read.
      local closed = -ncount
      if ncount < 2097152 and start - newest < P then closed = ncount * P + (start - newest) end
      args[1], args[2] = ns, fmt('%d', closed)
      if ndec > 0 then args[3], args[4] = 'd' .. ns, nds end
    else
      oldest = start
    end
    newest, ncount, ndec = start, rec, dec
  end
  -- "m": the stored strings where the values did not change (a join keeps
  -- o and n, an admission x and nd)
  local mv
  if not joins and not expired and live and dec == 0 then
    -- an open with nothing declined and nothing expired: x and o as read
    mv = fmt('%d %s %s %d %d 0', used, xs, os, newest, ncount)
  elseif live and not joins and dec == 0 and declined == x0 then
    -- an open that expired buckets with nothing declined in them (every
    -- key below its soft capacity): x as read
    mv = fmt('%d %s %d %d %d 0', used, xs, oldest, newest, ncount)
  elseif not joins or expired then
    mv = fmt('%d %d %d %d %d %d', used, declined, oldest, newest, ncount, ndec)
  elseif dec == 0 then
    mv = fmt('%d %s %s %s %d %s', used, xs, os, ns, ncount, nds)
  else
    mv = fmt('%d %d %s %s %d %d', used, declined, os, ns, ncount, ndec)
  end
  -- nt: the cursor to store after "k"'s four values (kt: unchanged)
  local nt = kt
  if dec > 0 or expired then
    -- The cursor a RetryAfter ended on, or the stored one with rb moved
    -- past the buckets that died, against the new oldest start. Its
    -- bucket's ra and rl are 0 while it is the newest (it may still
    -- grow) and set when this call closes it.
    local rs, rb, ra, rl = pS, pB, pA, pL
    if not rs and expired and rstate then rs, rb, ra, rl = rcs, rcb, rca, rcl end
    if rs then
      if rs == newest then
        ra, rl = 0, 0
      elseif rs == pn then
        ra, rl = pacc, newest - pn
      end
      -- Unchanged (the same numbers as read, against the same oldest
      -- start): nothing to write, and nothing to format.
      if not (rstate and not expired and rs == rcs and rb == rcb and ra == rca and rl == rcl) then
        nt = fmt(' %d %d %d %d', rs - oldest, rb, ra, rl)
      end
    elseif rraw or expired then
      -- Its bucket died, or the oldest start it counts from moved without
      -- it (a scan, or a cursor left unread): dropped.
      nt = ''
    end
  end
  if moved or writef or nt ~= kt then
    -- "k": the latest capacities, the factor cached (0 0: none), and the
    -- cursor, left out where it would make "k" longer than a listpack
    -- value (64 bytes: capacities or counts of many digits).
    local kf, kft = fs, fts
    if writef then
      kf, kft = fmt('%d', f), fmt('%d', now)
    elseif not live then
      kf, kft = '0', '0'
    end
    local kv = ARGV[4] .. ' ' .. ARGV[5] .. ' ' .. kf .. ' ' .. kft
    if #kv + #nt <= 64 then kv = kv .. nt end
    args = args or {}
    args[#args + 1], args[#args + 2] = 'k', kv
  end
  if vs ~= vrec then
    -- the record: on a new hash after "m" and "k", on a live hash written
    -- before the record with its first write
    args = args or {}
    args[#args + 1], args[#args + 2] = 'v', vrec
  end
  if args and #args == 2 then
    -- an open on a key with nothing declined: the closed bucket, without
    -- unpack
    redis.call('HSET', h, 'm', mv, args[1], args[2])
  elseif args then
    -- "m" first: on a new key it leads the listpack, where the HMGET of
    -- every call finds it soonest.
    redis.call('HSET', h, 'm', mv, unpack(args))
  else
    redis.call('HSET', h, 'm', mv) -- the common call: one field
  end
  -- The key dies with its newest bucket: W + B after that bucket opened
  -- (later than now for a forward-dated lease's bucket).
  if not joins or ARGV[1] ~= '' then
    if newest > now then
      redis.call('PEXPIRE', h, fmt('%d', ttl + newest - now))
    else
      redis.call('PEXPIRE', h, ttl)
    end
  end
  live = true
end

-- == 9. Reply ===========================================================
local accepted = used - declined
local reset = 0
if live then reset = newest + sp - now end
local remaining = soft - accepted
if remaining < 0 then remaining = 0 end
if hyb then
  -- The hybrid's reply (see the header): the units observed in the last
  -- R = min(W, 1 s) are all of them when the oldest live bucket is that
  -- recent, else read from the hash, and only at or above the soft
  -- capacity: below it no decision made from this reply needs the factor
  -- (the instance decides in memory with at most the accepted units of
  -- the reply, its lease included), so a key below S is spared the read of
  -- every field.
  local r, recent, first = math.min(w, 1000), 0, 0
  if live then
    first = oldest + sp - now
    if now - oldest < r then
      recent = used
    elseif now - newest < r and accepted >= soft then
      recent = ncount
      -- more fields than any record holds (another client's): an error
      -- naming the hash, not a read that holds Redis for every key
      local nf = redis.call('HLEN', h)
      if nf > 4096 then error({err = 'SLUICEFIELDS ' .. h .. ' ' .. nf}) end
      local all = redis.call('HGETALL', h)
      for i = 1, #all, 2 do
        local c = string.byte(all[i], 1)
        if c >= 48 and c <= 57 or c == 45 then
          local st = all[i] + 0
          if now - st < r and st ~= newest then
            local v = all[i + 1] + 0
            if v >= P then v = (v - v % P) / P elseif v < 0 then v = -v end
            recent = recent + v
          end
        end
      end
    end
  end
  local g = hext
  if allowed and write then g = g + n end
  -- when the factor was computed (script clock; 0: no factor was needed)
  local ft = 0
  if computed then ft = now elseif outcome == 2 and f < PPM and fts then ft = fts + 0 end
  return {outcome, allowed and 1 or 0, soft, remaining, retry, reset, f, never and 1 or 0,
    g, newest or 0, now, accepted, used, recent, first, ft}
end
if outcome == 0 then
  if remaining < 2097152 and reset < P then return remaining * P + reset end
  return {soft, remaining, reset}
end
if remaining == 0 and not never and retry < 65536 and reset < 65536 then
  -- the suppressed decision of an overloaded key, one integer
  local a = 0
  if allowed then a = 1 end
  return -(((f * 2 + a) * 65536 + retry) * 65536 + reset) - 1
end
return {outcome, allowed and 1 or 0, soft, remaining, retry, reset, f, never and 1 or 0}
