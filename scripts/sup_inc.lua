-- sup_inc.lua: one Inc of the suppressed strategy (docs/algorithms.md,
-- Suppressed strategy). It computes exactly what internal/window's
-- State.IncSuppressed computes, on the one-hash layout of docs/data-model.md.
--
-- KEYS[1]  <prefix>:{<key>}:sup:h, the key's hash
-- ARGV[1]  now in ms; an empty string reads Redis TIME
-- ARGV[2]  W, the window in ms
-- ARGV[3]  B, the bucket in ms
-- ARGV[4]  S, the soft capacity
-- ARGV[5]  H, the hard capacity (H >= S)
-- ARGV[6]  n, the cost; 0 is a peek for one unit that writes nothing; at
--          most H + 1 (a request that can never fit is sent as H + 1:
--          window.RecordedCost)
-- ARGV[7]  the suppression cache period in ms; 0 computes the factor on
--          every call
-- ARGV[8]  the call's random draw in ppm, in [0, 999999]
-- ARGV[9]  the PEXPIRE of every write in ms: W + B (longer only when the
--          caller sends its own clock in ARGV[1], see limiter/redissup)
--
-- Reply: an integer r >= 0 when admitted at or below the soft capacity
--         (outcome allowed, factor 0) with fewer than 2^21 units
--         remaining: remaining = floor(r / 2^32), reset after ms =
--         r mod 2^32, limit = S; {limit, remaining, reset after ms} for
--         such an admission with more remaining; otherwise {outcome,
--         allowed, limit, remaining, retry after ms, reset after ms,
--         factor ppm, never}, all integers; outcome is 2 (suppressed),
--         allowed and never are 0 or 1 (internal/redisx.Decision reads
--         all three).
--
-- Hash fields: "n" the newest bucket's start, "nc" the units offered in
-- it and "nd" those declined; "<start>" an older bucket starting at
-- <start> ms: the units offered in it and the link to the next bucket,
-- offered * 2^32 + (next start - start), or -offered when offered >= 2^21
-- (no link; a plain count is an earlier layout's); "d<start>" the units
-- declined in it (only when > 0); "u" the sum of all bucket counts
-- (observed), "x" the sum of the declined counts, "o" the oldest bucket
-- start, "c" and "hc" the soft and hard capacities of the latest Inc, "f"
-- the cached factor in ppm computed at "ft" ms (ft 0: none cached). "x",
-- "f" and "ft" exist from a key's first call on (an earlier layout's hash
-- may lack them: absent reads as 0). The newest bucket stays in "n", "nc",
-- "nd" until a newer one opens, so joining it writes a few front fields
-- (docs/data-model.md). The script never calls math.random: the draw is an
-- argument. ARGV[4], ARGV[5] and ARGV[6] are stored as sent, so they must be
-- plain decimals (as go-redis sends an int64). A meta field that is not a
-- number fails the call with a script error.
--
-- Cost: as in abs_inc.lua, numbers are parsed once (x + 0), only computed
-- numbers are formatted, and the common call (a key below its soft
-- capacity whose oldest bucket is live) makes no closure and no table and
-- answers with one integer (docs/benchmarks.md, Instructions per call).
-- The worst call reads the whole hash once (HGETALL) and walks it once:
-- at most W/B + 1 live buckets, which config.MaxBuckets bounds
-- (docs/algorithms.md, Bounded work).

if redis.replicate_commands then redis.replicate_commands() end

local PPM = 1000000
local MAXD = 4503599627370496 -- 2^52: window.MaxDeclined
local h = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = ARGV[1] + 0
end
local w, b, soft, hard, n = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0
local sp = w + b -- a bucket is live while now - start < W + B
local cache, draw, ttl = ARGV[7] + 0, ARGV[8] + 0, ARGV[9]
local write = n > 0
local fmt = string.format -- fmt('%d', x): tostring prints large numbers in exponent notation

local m = redis.call('HMGET', h, 'u', 'x', 'o', 'n', 'f', 'ft', 'nc', 'nd', 'c', 'hc')
local used, declined, oldest, newest, ncount, ndec = 0, 0, nil, nil, nil, 0
if m[1] then used = m[1] + 0 end
if m[2] then declined = m[2] + 0 end
if m[3] then oldest = m[3] + 0 end
if m[4] then newest = m[4] + 0 end
if m[7] then ncount = m[7] + 0 end
if m[8] then ndec = m[8] + 0 end
-- the capacities to store differ from the stored ones
local moved = m[9] ~= ARGV[4] or m[10] ~= ARGV[5]
local hasx = m[2] and true or false
-- Without "nc" (damaged, or written by an earlier layout) the hash is absent.
local live = newest ~= nil and ncount ~= nil and oldest ~= nil and now - newest < sp
local P = 4294967296 -- 2^32: a closed bucket's value is offered * P + link
local expired = false -- dead buckets were found: "o" (and "x") must be rewritten
-- After a scan (k set), the live buckets oldest first, in parallel arrays:
-- starts, offered units and declined units.
local k, bs, bo, bd

-- A key without a live bucket is absent: its capacities and cached factor
-- are forgotten.
if not live then
  if write and newest ~= nil then redis.call('DEL', h) end
  used, declined, oldest, newest, hasx, moved = 0, 0, nil, nil, false, true
  ncount, ndec = 0, 0
end

-- Expire along the links: drop the buckets that died since the last write,
-- oldest first, one HMGET (offered and declined) each, for up to 8 of them.
-- A missing or broken link, or more dead buckets (one HGETALL costs less
-- than that many HMGETs), leaves the call to scan below (linked false).
local linked, gone = true, nil -- gone: the fields of dead buckets
if live and now - oldest >= sp then
  expired, gone = true, {}
  local f, walked = m[3], 0
  while now - oldest >= sp do
    if walked >= 8 then linked = false break end
    walked = walked + 1
    local df = 'd' .. f
    local v = redis.call('HMGET', h, f, df)
    local off = v[1] and v[1] + 0
    local link = off and off % P
    if not off or off < P or link < 1 then linked = false break end
    used = used - (off - link) / P
    gone[#gone + 1] = f
    if v[2] then
      declined = declined - v[2]
      gone[#gone + 1] = df
    end
    oldest = oldest + link
    f = fmt('%d', oldest)
  end
  -- the links must end at the newest bucket with its counts left
  if linked and (oldest > newest or oldest == newest and (used ~= ncount or declined ~= ndec)) then
    linked = false
  end
end

local cost = math.max(n, 1)
-- The helpers below are made only for a call that may need them: one that
-- must scan (a missing or broken link), or one above the soft capacity (a
-- closure costs about as much as parsing three numbers).
local scan, factor, retryAfter, countOf
if not linked or used - declined + cost > soft then
  -- countOf reads the units offered in a closed bucket from its value.
  countOf = function(v)
    if v >= P then return (v - v % P) / P end
    if v < 0 then return -v end
    return v -- an earlier layout's plain count
  end

  -- scan reads the whole hash in one HGETALL (at most 2 (W/B + 1) bucket
  -- fields: docs/algorithms.md, Bounded work) and sets k, bs, bo, bd to
  -- its live buckets, oldest first; the newest, kept in meta fields, is the
  -- last. It returns the fields of the dead buckets and the sums of the
  -- live buckets' offered and declined units. A compact (listpack) hash
  -- returns its fields in the order they were written: ascending starts,
  -- each "d<start>" right after its bucket. Only a hash Redis has
  -- converted to a hash table needs the sort and the lookups by start.
  -- Numbers are parsed once and no table is made per bucket.
  scan = function()
    local all = redis.call('HGETALL', h)
    local dead, su, sd = {}, ncount, ndec
    local sorted, prev, lost = true, -1 / 0, nil
    k, bs, bo, bd = 0, {}, {}, {}
    for i = 1, #all, 2 do
      local f = all[i]
      local c = string.byte(f, 1)
      if c >= 48 and c <= 57 or c == 45 then -- a digit or '-': a bucket
        local st = f + 0
        if now - st >= sp then
          dead[#dead + 1] = f
        else
          local v = all[i + 1] + 0
          if v >= P then
            v = (v - v % P) / P
          elseif v < 0 then
            v = -v
          end -- else an earlier layout's plain count
          k = k + 1
          bs[k], bo[k], bd[k] = st, v, 0
          su = su + v
          if st < prev then sorted = false end
          prev = st
        end
      elseif c == 100 then -- 'd': a bucket's declined units
        local st = string.sub(f, 2) + 0
        if now - st >= sp then
          dead[#dead + 1] = f
        else
          local v = all[i + 1] + 0
          if k > 0 and bs[k] == st then
            bd[k] = v
          else
            lost = lost or {}
            lost[st] = v
          end
        end
      end
    end
    if not sorted or lost then
      local off, dec = {}, lost or {}
      for i = 1, k do
        off[bs[i]] = bo[i]
        if bd[i] ~= 0 then dec[bs[i]] = bd[i] end
      end
      if not sorted then table.sort(bs) end
      for i = 1, k do bo[i], bd[i] = off[bs[i]], dec[bs[i]] or 0 end
    end
    for i = 1, k do sd = sd + bd[i] end
    k = k + 1
    bs[k], bo[k], bd[k] = newest, ncount, ndec
    return dead, su, sd
  end

  -- factor returns the suppression factor in ppm and whether it was
  -- computed (rather than read from the cache): 1 - S*R / max(observed*R,
  -- recent*W) with R = min(W, 1000), recent the units offered in the last
  -- R ms, in doubles in the same order as window.State.Factor, rounded to
  -- the nearest ppm and clamped to [0, PPM].
  factor = function()
    if live and cache > 0 and m[5] and m[6] then
      local fppm, fat = m[5] + 0, m[6] + 0
      if fat > 0 and now - fat < cache then return fppm, false end -- ft 0: none
    end
    local r = math.min(w, 1000)
    local recent = 0
    if live then
      if now - oldest < r then
        recent = used
      elseif now - newest < r then
        if not k then scan() end
        for i = k, 1, -1 do
          if now - bs[i] >= r then break end
          recent = recent + bo[i]
        end
      end
    end
    local mx = math.max(used * r, recent * w)
    if mx <= 0 then return 0, true end
    local f = 1 - soft * r / mx
    local ppm = math.floor(f * PPM + 0.5)
    return math.min(math.max(ppm, 0), PPM), true
  end

  -- retryAfter walks the buckets oldest first until the accepted units
  -- still live after a bucket expires, plus cost, fit in cap.
  retryAfter = function(held, cap)
    if not live then return 0 end
    if not k then
      -- Fast path: the oldest bucket alone frees enough.
      local acc = ncount - ndec
      if oldest ~= newest then
        local v = redis.call('HMGET', h, fmt('%d', oldest), 'd' .. fmt('%d', oldest))
        acc = countOf(tonumber(v[1]) or 0) - (tonumber(v[2]) or 0)
      end
      if acc ~= 0 and (held - acc + cost <= cap or acc >= held) then
        return oldest + sp - now
      end
      scan() -- skips the dead buckets a peek leaves stored
    end
    local freed = 0
    for i = 1, k do
      local u = bo[i] - bd[i]
      if u ~= 0 then
        freed = freed + u
        if held - freed + cost <= cap or freed >= held then return bs[i] + sp - now end
      end
    end
    return 0
  end
end

-- Expire by a scan where the links could not: a bucket is live while
-- now - start < W.
if not linked then
  gone, used, declined = scan()
  oldest = bs[1]
end
if write and gone then
  for i = 1, #gone, 1000 do
    redis.call('HDEL', h, unpack(gone, i, math.min(i + 999, #gone)))
  end
end

-- Decide.
local forecast = used - declined + cost
local never = cost > hard
local outcome, allowed, f, computed = 0, true, 0, false
if forecast <= soft then
  -- below the soft capacity: admitted, factor 0
elseif forecast > hard then
  outcome, allowed, f = 2, false, PPM
else
  outcome = 2
  f, computed = factor()
  allowed = draw >= f
end

-- Record: join the newest bucket when now - newest < B, else open one at
-- now (no field of that name can exist: every start is <= newest < now).
if write then
  -- rec: the units recorded; a refusal records them all as declined, at
  -- most MAXD - declined of them and at least one, so that the totals stay
  -- exact integers (window.MaxDeclined).
  local rec, dec = n, 0
  if not allowed then
    rec = math.min(n, math.max(1, MAXD - declined))
    dec = rec
  end
  local joins = live and now - newest < b
  local start = now
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
  -- "x", "f" and "ft" are written from a key's first call on, 0 included,
  -- so that the HMGET of every call finds them at the front of the hash:
  -- a field that is absent costs a walk of the whole listpack.
  local writex = dec > 0 or expired or not hasx
  local writef = computed and cache > 0
  if joins and dec == 0 and not (expired or moved or writex or writef) then
    -- The common call: two front fields, no table.
    ncount = ncount + rec
    redis.call('HSET', h, 'nc', fmt('%d', ncount), 'u', fmt('%d', used))
  else
    local meta
    if joins then
      ncount, ndec = ncount + rec, ndec + dec
      meta = {'nc', fmt('%d', ncount), 'u', fmt('%d', used)}
      if dec > 0 then
        meta[#meta + 1] = 'nd'
        meta[#meta + 1] = fmt('%d', ndec)
      end
      if expired then
        meta[#meta + 1] = 'o'
        meta[#meta + 1] = fmt('%d', oldest)
      end
    else
      meta = {'n', fmt('%d', start), 'nc', fmt('%d', rec), 'nd', fmt('%d', dec), 'u', fmt('%d', used)}
      if live then
        -- The newest bucket so far becomes ordinary fields: its offered
        -- units with the link to the new bucket, its declined units as
        -- read.
        local closed = -ncount
        if ncount < 2097152 and start - newest < P then closed = ncount * P + (start - newest) end
        meta[#meta + 1] = m[4]
        meta[#meta + 1] = fmt('%d', closed)
        if ndec > 0 then
          meta[#meta + 1] = 'd' .. m[4]
          meta[#meta + 1] = m[8]
        end
      end
      if not live or expired then
        if not live then oldest = start end
        meta[#meta + 1] = 'o'
        meta[#meta + 1] = fmt('%d', oldest)
      end
      newest, ncount, ndec = start, rec, dec
    end
    if moved then
      meta[#meta + 1] = 'c'
      meta[#meta + 1] = ARGV[4]
      meta[#meta + 1] = 'hc'
      meta[#meta + 1] = ARGV[5]
    end
    if writex then
      meta[#meta + 1] = 'x'
      meta[#meta + 1] = fmt('%d', declined)
    end
    if writef then
      meta[#meta + 1] = 'f'
      meta[#meta + 1] = fmt('%d', f)
      meta[#meta + 1] = 'ft'
      meta[#meta + 1] = fmt('%d', now)
    elseif not live then
      meta[#meta + 1], meta[#meta + 2], meta[#meta + 3], meta[#meta + 4] = 'f', '0', 'ft', '0'
    end
    redis.call('HSET', h, unpack(meta))
  end
  live = true
  redis.call('PEXPIRE', h, ttl)
end

local accepted = used - declined
local retry = 0
if not allowed and not never then retry = retryAfter(accepted, soft) end
local reset = 0
if live then reset = newest + sp - now end
local remaining = math.max(soft - accepted, 0)
if outcome == 0 then
  if remaining < 2097152 and reset < P then return remaining * P + reset end
  return {soft, remaining, reset}
end
return {outcome, allowed and 1 or 0, soft, remaining, retry, reset, f, never and 1 or 0}
