-- sup_inc.lua: one Inc of the suppressed strategy, the Redis twin of
-- internal/window's State.IncSuppressed (fields, record "v" and error
-- replies: docs/data-model.md; "-- == N." lines: bench/floor/sections.sh).
--
-- KEYS[1]  <prefix>:{<key>}:sup:h, the key's hash
-- ARGV[1]  now in ms; an empty string reads Redis TIME
-- ARGV[2]  W, ARGV[3] B: the window and the bucket in ms
-- ARGV[4]  S, ARGV[5] H (H >= S): the soft and hard capacities, plain
--          decimals stored as sent
-- ARGV[6]  n, the cost, at most H + 1; 0 is a peek for one unit, no write
-- ARGV[7]  the factor's cache period in ms; 0 computes it on every call
-- ARGV[8]  the call's random draw in ppm, in [0, 999999]
-- ARGV[9]  the PEXPIRE in ms, W + B, set by a write that opens a bucket,
--          and by every write under the caller's clock
-- ARGV[10] optional, the hybrid's lease (docs/algorithms.md, Hybrid
--          leases): the most units to reserve, n included, 0 for none; the
--          call records e more, e <= ARGV[10] - n and a quarter of the room
--          left below H (n = 0: a renewal)
-- ARGV[11] with ARGV[12]: the start (ms) of the bucket an earlier lease
-- ARGV[12] used and its unused units, given back first (0: no release)
-- ARGV[13] units declined from memory since the last call, recorded as
--          offered and declined (at least one)
-- ARGV[14] optional, D: the most ms a lease's bucket may start after now
-- ARGV[15] optional, 'writeback': n units a local fallback admitted,
--          recorded as accepted whatever the key holds (ARGV[10..14] 0)
--
-- Reply (internal/redisprov.Decision reads every form):
--   r >= 0: admitted at or below S, fewer than 2^21 remaining:
--     remaining = floor(r / 2^32), reset = r mod 2^32;
--   {limit, remaining, reset after ms}: such an admission, more remaining;
--   r < 0: suppressed, nothing remaining, not never, retry and reset below
--     2^16 ms: v = -r - 1, reset = v mod 2^16, retry = floor(v / 2^16) mod
--     2^16, allowed = floor(v / 2^32) mod 2, factor ppm = floor(v / 2^33);
--   otherwise {outcome, allowed, limit (S), remaining, retry after ms,
--     reset after ms, factor ppm, never}.
--   With ARGV[10]: the eight values, then g (accepted units recorded), the
--     start of the bucket written, now, accepted, observed, observed in the
--     last min(W, 1 s) (0 below S), ms until the oldest live bucket dies,
--     when the factor was computed (0: none).
-- == 1. Arguments =======================================================
if redis.replicate_commands then redis.replicate_commands() end
local ARGV, redis, string = ARGV, redis, string

local PPM = 1000000
local MAXD = 4503599627370496 -- 2^52: window.MaxDeclined
local h = KEYS[1]
-- include now.lua
local n = 1
if ARGV[6] ~= '1' then n = ARGV[6] + 0 end
local w, b, soft = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local sp = w + b -- a bucket is live while now - start < W + B
local hard, cache, draw, wb -- parsed only where a decision needs them
local ttl = ARGV[9]
local write = n > 0
local fmt = string.format -- fmt('%d', x): tostring prints large numbers in exponent notation
-- == 2. The hybrid's arguments and the release of a lease ===============
local hyb = ARGV[10] ~= nil and ARGV[15] ~= 'writeback'
local hwant, hpush, hext = 0, 0, 0 -- hext: the lease beyond n (section 8)
if hyb then
  hwant, hpush = ARGV[10] + 0, ARGV[13] + 0
  hard, cache, draw, wb = ARGV[5] + 0, ARGV[7] + 0, ARGV[8] + 0, false
  if hwant > 0 or hpush > 0 then write = true end
  local rel, HP = ARGV[12] + 0, 4294967296
  local mk0 = rel > 0 and redis.call('HMGET', h, 'm', 'k')
  local u0, x0s, o0, n0, nc0, nd0, k0 -- k0: "k" without its cursor
  if mk0 and mk0[1] then u0, x0s, o0, n0, nc0, nd0 = string.match(mk0[1], '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$') end
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
      -- the cursor's counts changed: "k" loses it
      local kx = {}
      if field then kx[1], kx[2] = ARGV[11], field end
      if k0 then kx[#kx + 1], kx[#kx + 2] = 'k', k0 end
      redis.call('HSET', h, 'm', mv0, unpack(kx))
    end
  end
end
-- == 3. Decode: the meta fields and the record ==========================
-- "m" = "<u> <x> <o> <n> <nc> <nd>", "k" = "<c> <hc> <f> <ft>" and perhaps
-- the RetryAfter cursor kt; a hash without both is absent (docs/data-model.md).
local mk = redis.call('HMGET', h, 'm', 'k', 'v')
local vs, vrec = mk[3], 's2 ' .. ARGV[2] .. ' ' .. ARGV[3] -- the record as stored, as written
local us, xs, os, ns, ncs, nds, cs, hcs, fs, fts, kt
if mk[1] then us, xs, os, ns, ncs, nds = string.match(mk[1], '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$') end
if mk[2] then
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
  -- dead W + B after the newest bucket, or W + B before it (a clock that stepped back)
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
  used, oldest, ncount = us + 0, newest, ncs + 0
  if os ~= ns then oldest = os + 0 end -- one bucket: o = n, parsed once
  if xs ~= '0' then declined = xs + 0 end
  if nds ~= '0' then ndec = nds + 0 end
  -- 2^53 or more (inexact in a double): another client's count
  if used >= 9007199254740992 or ncount >= 9007199254740992 or declined >= 9007199254740992 then
    return redis.error_reply('SLUICESTATE ' .. h .. ' m ' .. mk[1])
  end
end
local ostart = oldest -- "o" as stored, which the links below may move
local moved = cs ~= ARGV[4] or hcs ~= ARGV[5] -- the capacities changed
local P = 4294967296 -- 2^32: a closed bucket's value is offered * P + link
local expired = false -- dead buckets were found: "o" (and "x") must be rewritten
local k, bs, bo, bd -- after a scan: the live buckets, oldest first

-- No live bucket: the key is absent, and a write replaces the hash whole.
if not live then
  if write then redis.call('DEL', h) end
  vs = false -- a write stores the record anew
  used, declined, oldest, newest, moved = 0, 0, nil, nil, true
  ncount, ndec, kt = 0, 0, ''
end
-- == 4. Expire: the buckets that died ===================================
-- Along the links, up to 8 buckets; else the scan (linked false). With
-- x = 0 no bucket stores a d field: the walk reads the bucket alone.
local linked, g1, gone = true, nil, nil -- the dead fields: the first in g1, all in gone from a second on (or the scan's)
local deadAcc, x0 = 0, declined -- deadAcc: accepted units walked past
if live and now - oldest >= sp then
  expired = true
  local f, walked = os, 0 -- f: the oldest start as a string, when known
  while now - oldest >= sp do
    if walked >= 8 then linked = false break end
    walked = walked + 1
    if not f then f = fmt('%d', oldest) end
    local off, dv, df
    if x0 > 0 then
      df = 'd' .. f
      local v = redis.call('HMGET', h, f, df)
      off, dv = v[1], v[2]
    else
      off = redis.call('HGET', h, f)
    end
    off = off and off + 0
    local link = off and off % P
    if not off or off < P or link < 1 then linked = false break end
    used = used - (off - link) / P
    deadAcc = deadAcc + (off - link) / P
    if not g1 then g1 = f else gone = gone or {g1}; gone[#gone + 1] = f end
    if dv then
      declined = declined - dv
      deadAcc = deadAcc - dv
      gone = gone or {g1}
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

-- The hybrid's declines count as observed for this call's factor, as if
-- recorded before it (accepted is unchanged), capped as a refusal's are.
if hyb then
  if hpush > 0 and declined + hpush > MAXD then
    hpush = MAXD - declined
    if hpush < 1 then hpush = 1 end
  end
  used, declined = used + hpush, declined + hpush
end

-- Decided here when the totals are exact and the call is below S, above H
-- or has the factor cached; else in section 7. never is false where H is
-- not parsed: there cost <= forecast <= S <= H.
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
-- The RetryAfter cursor kt, parsed only where it may be used, trusted only
-- after expiry along the links and while rs = o + rd is live. rstate: rcs,
-- rcb (less deadAcc), rca, rcl hold it; rraw: kt when it parsed.
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

-- RetryAfter from the cursor alone when its bucket holds the answer, else
-- by retryAfter. pS..pL: the cursor a RetryAfter ended on.
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
if not decided or not rdone then
  local scan, factor, retryAfter
  -- scan: sup_scan.lua's scanBuckets, setting k, bs, bo, bd
  -- include sup_scan.lua
  scan = function()
    local dead, su, sd
    dead, su, sd, k, bs, bo, bd = scanBuckets(h, now, sp, newest, ncount, ndec)
    return dead, su, sd
  end

  -- factor returns the factor in ppm and whether it was computed (not
  -- cached), as window.State.Factor, in the same order of doubles.
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
        -- without a scan: the total less the buckets before now - R
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

  -- retryAfter, as window.State.RetryAfter: up to 8 buckets along the
  -- links from the cursor or the oldest, then a scan; its end in pS..pL.
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

  -- Expire by a scan where the links could not (a refusal sets a new cursor).
  if not linked then
    gone, used, declined = scan()
    g1 = nil
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
if write and g1 and not gone then
  redis.call('HDEL', h, g1) -- the usual case: one dead bucket, no table
elseif write and gone then
  if #gone == 1 then
    redis.call('HDEL', h, gone[1]) -- the usual case, without unpack
  else
    for i = 1, #gone, 1000 do
      redis.call('HDEL', h, unpack(gone, i, math.min(i + 999, #gone)))
    end
  end
end

-- The lease hext (the header's e), even for a refused n.
if hyb and hwant > n and not never then
  local room = hard - (used - declined)
  if allowed then room = room - n end
  hext = math.max(0, math.min(hwant - n, math.floor((room + 3) / 4)))
end

-- Record: join the newest bucket when at - newest < B, else open one at
-- at (no field of that name can exist: every start is <= newest < at).
if write then
  local pn, pacc = newest, ncount - ndec -- the newest bucket before the call
  -- rec: the units recorded, a refusal's all declined and capped (MAXD)
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
  -- at: now, or later for a forward-dated lease (ARGV[14])
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
  -- the HSET's fields after "m": the closed bucket c1 = c2, then args
  -- (made only when the call writes more)
  local c1, c2, args
  if joins then
    ncount, ndec = ncount + rec, ndec + dec
  else
    if live then
      -- the newest bucket becomes fields: offered * P + link, declined
      local closed = -ncount
      if ncount < 2097152 and start - newest < P then closed = ncount * P + (start - newest) end
      c1, c2 = ns, fmt('%d', closed)
      if ndec > 0 then args = {'d' .. ns, nds} end
    else
      oldest = start
    end
    newest, ncount, ndec = start, rec, dec
  end
  -- "m": the stored strings where the values did not change, joined by
  -- concatenation (fmt's %s costs a sprintf)
  local mv
  if not joins and not expired and live and dec == 0 then
    mv = fmt('%d ', used) .. xs .. ' ' .. os .. fmt(' %d %d 0', newest, ncount)
  elseif not joins and declined == 0 then
    mv = fmt('%d 0 %d %d %d 0', used, oldest, newest, ncount) -- an open, nothing declined
  elseif not joins or expired then
    mv = fmt('%d %d %d %d %d %d', used, declined, oldest, newest, ncount, ndec)
  elseif dec == 0 then
    mv = fmt('%d ', used) .. xs .. ' ' .. os .. ' ' .. ns .. fmt(' %d ', ncount) .. nds
  else
    mv = fmt('%d %d ', used, declined) .. os .. ' ' .. ns .. fmt(' %d %d', ncount, ndec)
  end
  local nt = kt -- the cursor to store after "k"'s four values
  if dec > 0 or expired then
    -- The cursor a RetryAfter ended on, or the stored one moved past the
    -- dead buckets; ra and rl are 0 while its bucket is the newest.
    local rs, rb, ra, rl = pS, pB, pA, pL
    if not rs and expired and rstate then rs, rb, ra, rl = rcs, rcb, rca, rcl end
    if rs then
      if rs == newest then
        ra, rl = 0, 0
      elseif rs == pn then
        ra, rl = pacc, newest - pn
      end
      -- unchanged: nothing to format
      if not (rstate and not expired and rs == rcs and rb == rcb and ra == rca and rl == rcl) then
        nt = fmt(' %d %d %d %d', rs - oldest, rb, ra, rl)
      end
    elseif rraw or expired then
      -- its bucket died, or the start it counts from moved: dropped
      nt = ''
    end
  end
  if moved or writef or nt ~= kt then
    -- "k": the capacities, the factor cached (0 0: none), and the cursor
    -- unless "k" would pass a listpack value's 64 bytes
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
    -- the record: on a new hash, or on a live hash written before it
    args = args or {}
    args[#args + 1], args[#args + 2] = 'v', vrec
  end
  if c1 and args then
    redis.call('HSET', h, 'm', mv, c1, c2, unpack(args))
  elseif c1 then
    redis.call('HSET', h, 'm', mv, c1, c2) -- an open
  elseif args and #args == 2 then
    redis.call('HSET', h, 'm', mv, args[1], args[2])
  elseif args then
    -- "m" first: on a new key it leads the listpack, found soonest
    redis.call('HSET', h, 'm', mv, unpack(args))
  else
    redis.call('HSET', h, 'm', mv) -- the common call: one field
  end
  -- The key dies W + B after its newest bucket opened (perhaps after now).
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
  -- recent: the units observed in the last min(W, 1 s), read only at or
  -- above S (below it the instance needs no factor)
  local r, recent, first = math.min(w, 1000), 0, 0
  if live then
    first = oldest + sp - now
    if now - oldest < r then
      recent = used
    elseif now - newest < r and accepted >= soft then
      recent = ncount
      -- HLEN first: another client's padded hash fails, never holds Redis
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
  -- the suppressed decision of an overloaded key
  local a = 0
  if allowed then a = 1 end
  return -(((f * 2 + a) * 65536 + retry) * 65536 + reset) - 1
end
return {outcome, allowed and 1 or 0, soft, remaining, retry, reset, f, never and 1 or 0}
