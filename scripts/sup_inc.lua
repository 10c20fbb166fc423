-- sup_inc.lua: one Inc of the suppressed strategy (DESIGN.md §4). It
-- computes exactly what internal/window's State.IncSuppressed computes, on
-- the one-hash layout of docs/data-model.md.
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
local buckets -- after a scan: the live buckets {start, count, declined}, oldest first

-- A key without a live bucket is absent: its capacities and cached factor
-- are forgotten.
if not live then
  if write and newest ~= nil then redis.call('DEL', h) end
  used, declined, oldest, newest, hasx, moved = 0, 0, nil, nil, false, true
  ncount, ndec = 0, 0
end

-- Expire along the links: drop the buckets that died since the last write,
-- oldest first, one HMGET (offered and declined) each. A missing or broken
-- link leaves the call to scan below (linked false).
local linked, gone = true, nil -- gone: the fields of dead buckets
if live and now - oldest >= sp then
  expired, gone = true, {}
  local f = m[3]
  while now - oldest >= sp do
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

  -- scan reads every bucket of the hash, oldest first; the newest, kept in
  -- meta fields, is the last.
  scan = function()
    local all = redis.call('HGETALL', h)
    local count, dec, starts = {}, {}, {}
    for i = 1, #all, 2 do
      local f = all[i]
      local c = string.byte(f, 1)
      if c >= 48 and c <= 57 or c == 45 then -- a digit or '-': a bucket
        local s = tonumber(f)
        count[s] = countOf(tonumber(all[i + 1]))
        starts[#starts + 1] = s
      elseif c == 100 then -- 'd': a bucket's declined units
        dec[tonumber(string.sub(f, 2))] = tonumber(all[i + 1])
      end
    end
    table.sort(starts)
    local out = {}
    for i, s in ipairs(starts) do out[i] = {s, count[s], dec[s] or 0} end
    out[#out + 1] = {newest, ncount, ndec}
    return out
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
        buckets = buckets or scan()
        for i = #buckets, 1, -1 do
          local bk = buckets[i]
          if now - bk[1] >= r then break end
          recent = recent + bk[2]
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
    if not buckets then
      -- Fast path: the oldest bucket alone frees enough.
      local acc = ncount - ndec
      if oldest ~= newest then
        local v = redis.call('HMGET', h, fmt('%d', oldest), 'd' .. fmt('%d', oldest))
        acc = countOf(tonumber(v[1]) or 0) - (tonumber(v[2]) or 0)
      end
      if acc ~= 0 and (held - acc + cost <= cap or acc >= held) then
        return oldest + sp - now
      end
      buckets = scan()
    end
    -- A scan made here may still hold the dead buckets that the links
    -- dropped from the counts (a peek deletes nothing): skip them.
    local freed = 0
    for _, bk in ipairs(buckets) do
      local u = bk[2] - bk[3]
      if u ~= 0 and now - bk[1] < sp then
        freed = freed + u
        if held - freed + cost <= cap or freed >= held then return bk[1] + sp - now end
      end
    end
    return 0
  end
end

-- Expire by a scan where the links could not: a bucket is live while
-- now - start < W.
if not linked then
  buckets = {}
  used, declined = 0, 0
  gone = {}
  for _, bk in ipairs(scan()) do
    if now - bk[1] < sp then
      buckets[#buckets + 1] = bk
      used = used + bk[2]
      declined = declined + bk[3]
    else
      gone[#gone + 1] = fmt('%d', bk[1])
      if bk[3] > 0 then gone[#gone + 1] = 'd' .. fmt('%d', bk[1]) end
    end
  end
  oldest = buckets[1][1]
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
  if buckets then
    if joins then
      local last = buckets[#buckets]
      last[2] = last[2] + rec
      last[3] = last[3] + dec
    else
      buckets[#buckets + 1] = {start, rec, dec}
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
