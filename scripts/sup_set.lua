-- sup_set.lua: one call of the suppressed strategy on a set of limits of
-- one key, decided as one: the Redis twin of internal/window's
-- IncSuppressedSet. Each limit's hash is handled as sup_inc.lua handles
-- its one; the call is admitted when draw >= the largest factor. A write
-- records the offer in every limit and sets each TTL by abs_set.lua's
-- rule, its span t a fifth value of "k" (docs/data-model.md).
--
-- KEYS[i]  <prefix>:{<key>}:sup:h:<name>, the hash of limit i, 1 <= i <= 8
-- ARGV[1]  now in ms; an empty string reads Redis TIME
-- ARGV[2]  the suppression cache period in ms; 0 computes every factor
-- ARGV[3]  the call's random draw in ppm, in [0, 999999]
-- then six values per limit i, from ARGV[4 + 6 (i - 1)]: W, B, S, H (H >=
--   S), n (the cost to record in this limit, H + 1 when n > H:
--   window.RecordedCost; 0 in every limit for a peek) and the PEXPIRE of
--   a write in ms (W + B)
-- ARGV[4 + 6k]  optional, 'writeback': units a local fallback admitted,
--          recorded as accepted in every limit whatever it holds
--
-- Reply: {allowed, then six integers per limit: outcome (0 within S, 2
--         above), refused (the draw is below the limit's own factor),
--         remaining, retry after ms (only when the set refused the call,
--         n <= H and the limit is above S), reset after ms, factor ppm}.
if redis.replicate_commands then redis.replicate_commands() end

-- The functions capture none of the script's locals (declared after
-- them): a limit's state L carries what they read.

-- scan: sup_scan.lua's scanBuckets on L, setting L.k, L.bs, L.bo, L.bd.
local function scan(L)
  -- include sup_scan.lua
  local NOW, H, SP, NEWEST, NCOUNT, NDEC, K, BS, BO, BD = 1, 3, 6, 20, 21, 22, 26, 27, 28, 29
  local dead, su, sd
  dead, su, sd, L[K], L[BS], L[BO], L[BD] = scanBuckets(L[H], L[NOW], L[SP], L[NEWEST], L[NCOUNT], L[NDEC])
  return dead, su, sd
end

-- load reads and expires limit i's hash, and returns its state L.
local function load(i, write, now, cache)
  local USED, DECLINED, OLDEST, BS = 17, 18, 19, 27
  local P, fmt = 4294967296, string.format
  local a = 4 + 6 * (i - 1)
  local h = KEYS[i]
  local w, b, sarg, harg = ARGV[a] + 0, ARGV[a + 1] + 0, ARGV[a + 2], ARGV[a + 3]
  local sp = w + b
  -- "m" and "k" as in sup_inc.lua; "k" ends in t; a hash without both is absent.
  local mk = redis.call('HMGET', h, 'm', 'k', 'v')
  local us, xs, os, ns, ncs, nds, cs, hcs, fs, fts, ts
  if mk[1] then us, xs, os, ns, ncs, nds = string.match(mk[1], '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$') end
  if not mk[2] then
  elseif ARGV[1] == '' then
    cs, hcs, fs, fts, ts = string.match(mk[2], '^(%d+) (%d+) (%d+) (%-?%d+) (%d+)$')
  else -- under the caller's clock t is never read: no capture
    cs, hcs, fs, fts = string.match(mk[2], '^(%d+) (%d+) (%d+) (%-?%d+) %d+$')
  end
  local used, declined, oldest, newest, ncount, ndec = 0, 0, nil, nil, 0, 0
  local live = false
  if ns and cs then
    newest = ns + 0
    live = now - newest < sp and newest - now < sp
  end
  local vrec = 's2 ' .. ARGV[a] .. ' ' .. ARGV[a + 1] -- the record to write, false when stored
  if mk[3] == vrec then
    vrec = false
  elseif mk[3] then
    -- another record: as sup_inc.lua
    local rw, rb = string.match(mk[3], '^s2 (%d+) (%d+)$')
    if not rw then return nil, 'SLUICELAYOUT ' .. mk[3] end
    if ns and cs and now - ns < rw + rb then return nil, 'SLUICEWINDOW ' .. mk[3] .. ' ' .. vrec end
    live = false
  end
  if live then used, declined, oldest, ncount, ndec = us + 0, xs + 0, os + 0, ncs + 0, nds + 0 end
  local moved = cs ~= sarg or hcs ~= harg -- the capacities changed
  local expired = false -- dead buckets were found: "o" (and "x") must be rewritten

  -- No live bucket: the hash is absent, and a write replaces it whole.
  if not live then
    if write then redis.call('DEL', h) end
    vrec = 's2 ' .. ARGV[a] .. ' ' .. ARGV[a + 1] -- a write stores the record anew
    used, declined, oldest, newest, moved = 0, 0, nil, nil, true
    ncount, ndec = 0, 0
  end

  -- Expire along the links, up to 8, as sup_inc.lua; else scan below.
  local linked, gone = true, nil -- gone: the fields of dead buckets
  if live and now - oldest >= sp then
    expired, gone = true, {}
    local f, walked = os, 0
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
  -- L: one array from one positional constructor, sized once; each
  -- function names the positions it uses: 1 now, 2 cache, 3 h, 4 w, 5 b,
  -- 6 sp, 7 sarg, 8 harg, 9 soft, 10 hard, 11 n, 12 ttl, 13 ns, 14 nds,
  -- 15 fs, 16 fts, 17 used, 18 declined, 19 oldest, 20 newest, 21 ncount,
  -- 22 ndec, 23 moved, 24 live, 25 expired, 26 k, 27 bs, 28 bo, 29 bd,
  -- 30 cost, 31 never, 32 outcome, 33 f, 34 computed, 35 ts, 36 vrec.
  local L = {now, cache, h, w, b, sp, sarg, harg, sarg + 0, harg + 0, ARGV[a + 4] + 0, ARGV[a + 5], ns,
    nds, fs, fts, used, declined, oldest or 0, newest or 0, ncount, ndec, moved, live, expired, false,
    false, false, false, 0, false, 0, 0, false, ts or '0', vrec}

  if not linked then
    gone, L[USED], L[DECLINED] = scan(L)
    L[OLDEST] = L[BS][1]
  end
  if write and gone then
    for j = 1, #gone, 1000 do
      redis.call('HDEL', h, unpack(gone, j, math.min(j + 999, #gone)))
    end
  end
  return L
end

-- factor and retryAfter: as sup_inc.lua's, on L.
local function factor(L)
  local NOW, CACHE, W, SOFT, FS, FTS = 1, 2, 4, 9, 15, 16
  local USED, OLDEST, NEWEST, LIVE, K, BS, BO = 17, 19, 20, 24, 26, 27, 28
  local now, cache, PPM = L[NOW], L[CACHE], 1000000
  if L[LIVE] and cache > 0 then
    local fppm, fat = L[FS] + 0, L[FTS] + 0
    if fat > 0 and now - fat < cache then return fppm, false end -- ft 0: none
  end
  local w = L[W]
  local r = math.min(w, 1000)
  local recent = 0
  if L[LIVE] then
    if now - L[OLDEST] < r then
      recent = L[USED]
    elseif now - L[NEWEST] < r then
      if not L[K] then scan(L) end
      local bs, bo = L[BS], L[BO]
      for i = L[K], 1, -1 do
        if now - bs[i] >= r then break end
        recent = recent + bo[i]
      end
    end
  end
  local mx = math.max(L[USED] * r, recent * w)
  if mx <= 0 then return 0, true end
  local f = 1 - L[SOFT] * r / mx
  local ppm = math.floor(f * PPM + 0.5)
  return math.min(math.max(ppm, 0), PPM), true
end

local function retryAfter(L, held, cap)
  local NOW, H, SP, OLDEST, NEWEST, NCOUNT = 1, 3, 6, 19, 20, 21
  local NDEC, LIVE, K, BS, BO, BD, COST = 22, 24, 26, 27, 28, 29, 30
  local now, P, fmt = L[NOW], 4294967296, string.format
  if not L[LIVE] then return 0 end
  local cost = L[COST]
  if not L[K] then
    local st, newest, freed, steps = L[OLDEST], L[NEWEST], 0, 0
    local h = L[H] -- KEYS[i]
    while st < newest and steps < 8 do
      steps = steps + 1
      local o = fmt('%d', st)
      local v = redis.call('HMGET', h, o, 'd' .. o)
      local off, link = tonumber(v[1]) or 0, 0
      if off >= P then
        link = off % P
        off = (off - link) / P
      elseif off < 0 then
        off = -off
      end -- else a plain count, or a lease's 0: no link
      local acc = off - (tonumber(v[2]) or 0)
      if acc ~= 0 then
        freed = freed + acc
        if held - freed + cost <= cap or freed >= held then return st + L[SP] - now end
      end
      if link < 1 then break end
      st = st + link
    end
    if st == newest then
      local acc = L[NCOUNT] - L[NDEC]
      if acc ~= 0 then
        freed = freed + acc
        if held - freed + cost <= cap or freed >= held then return st + L[SP] - now end
      end
      return 0
    end
    scan(L) -- skips the dead buckets a peek leaves stored
  end
  local bs, bo, bd = L[BS], L[BO], L[BD]
  local freed = 0
  for i = 1, L[K] do
    local u = bo[i] - bd[i]
    if u ~= 0 then
      freed = freed + u
      if held - freed + cost <= cap or freed >= held then return bs[i] + L[SP] - now end
    end
  end
  return 0
end

-- record writes L's offer as sup_inc.lua's write does.
local function record(L, allowed)
  local NOW, CACHE, H, B, SARG, HARG, N, TTL, NS, NDS, FS, FTS, USED = 1, 2, 3, 5, 7, 8, 11, 12, 13, 14, 15, 16, 17
  local DECLINED, OLDEST, NEWEST, NCOUNT, NDEC, MOVED = 18, 19, 20, 21, 22, 23
  local LIVE, K, BS, BO, BD, F, COMPUTED = 24, 26, 27, 28, 29, 33, 34
  local now, cache, P, fmt, MAXD = L[NOW], L[CACHE], 4294967296, string.format, 4503599627370496
  local h, n = L[H], L[N]
  local live, newest, ncount, ndec = L[LIVE], L[NEWEST], L[NCOUNT], L[NDEC]
  local rec, dec = n, 0
  if not allowed then
    rec = math.min(n, math.max(1, MAXD - L[DECLINED]))
    dec = rec
  end
  local joins = live and now - newest < L[B]
  local start = now
  if joins then start = newest end
  local k = L[K]
  if k then
    if joins then
      L[BO][k], L[BD][k] = L[BO][k] + rec, L[BD][k] + dec
    else
      k = k + 1
      L[K] = k
      L[BS][k], L[BO][k], L[BD][k] = start, rec, dec
    end
  end
  local used = L[USED] + rec
  local declined = L[DECLINED] + dec
  L[USED], L[DECLINED] = used, declined
  local writef = L[COMPUTED] and cache > 0
  -- keep: the t to store; tl, tj: the PEXPIRE of an open, of a join (abs_set.lua)
  local TS = 35
  local keep, tl, tj = L[TTL], L[TTL], false
  if ARGV[1] ~= '' then
    keep, tj = '0', tl
  elseif live and L[TS] ~= keep then
    local sv, tv = L[TS] + 0, keep + 0
    if sv > tv then
      keep, tl = L[TS], L[TS]
    else
      tj = fmt('%d', tv - (now - newest))
    end
  end
  if not joins then tj = tl end
  local args -- the HSET, made only when the call writes more than "m"
  if joins then
    L[NCOUNT], L[NDEC] = ncount + rec, ndec + dec
  else
    args = {}
    if live then
      -- the newest bucket becomes fields: offered * P + link, declined
      local closed = -ncount
      if ncount < 2097152 and start - newest < P then closed = ncount * P + (start - newest) end
      args[1], args[2] = L[NS], fmt('%d', closed)
      if ndec > 0 then args[3], args[4] = 'd' .. L[NS], L[NDS] end
    else
      L[OLDEST] = start
    end
    L[NEWEST], L[NCOUNT], L[NDEC] = start, rec, dec
  end
  local mv = fmt('%d %d %d %d %d %d', used, declined, L[OLDEST], L[NEWEST], L[NCOUNT], L[NDEC])
  if L[MOVED] or writef or keep ~= L[TS] then
    -- "k": the latest capacities, the factor cached (0 0: none).
    local kf, kft = L[FS], L[FTS]
    if writef then
      kf, kft = fmt('%d', L[F]), fmt('%d', now)
    elseif not live then
      kf, kft = '0', '0'
    end
    args = args or {}
    args[#args + 1], args[#args + 2] = 'k', L[SARG] .. ' ' .. L[HARG] .. ' ' .. kf .. ' ' .. kft .. ' ' .. keep
  end
  if L[36] then
    -- the record: on a new hash, or on a live hash written before it
    args = args or {}
    args[#args + 1], args[#args + 2] = 'v', L[36]
  end
  if args then
    redis.call('HSET', h, 'm', mv, unpack(args))
  else
    redis.call('HSET', h, 'm', mv) -- the common call: one field
  end
  L[LIVE] = true
  if tj then redis.call('PEXPIRE', h, tj) end
end

local PPM = 1000000
local MAXD = 4503599627370496 -- 2^52: window.MaxDeclined
local P = 4294967296 -- 2^32: a closed bucket's value is offered * P + link
local fmt = string.format -- fmt('%d', x): tostring prints large numbers in exponent notation

local nk = #KEYS
if nk < 1 or nk > 8 or #ARGV ~= 3 + 6 * nk and #ARGV ~= 4 + 6 * nk then
  return redis.error_reply('ERR sup_set.lua: ' .. nk .. ' keys and ' .. #ARGV .. ' arguments')
end
-- include now.lua
local cache, draw = ARGV[2] + 0, ARGV[3] + 0

-- Read every limit and decide: the set's factor is the largest.
local SP, SOFT, HARD, N, USED, DECLINED = 6, 9, 10, 11, 17, 18
local NEWEST, LIVE, COST, NEVER, OUTCOME, F, COMPUTED = 20, 24, 30, 31, 32, 33, 34
local write = ARGV[8] + 0 > 0 -- the first limit's n: all are 0 for a peek
local ls = {}
local setf = 0
for i = 1, nk do
  local L, lerr = load(i, write, now, cache)
  if not L then return redis.error_reply(lerr) end
  ls[i] = L
  local cost = math.max(L[N], 1)
  L[COST] = cost
  L[NEVER] = cost > L[HARD]
  local forecast = L[USED] - L[DECLINED] + cost
  local outcome, f, computed = 0, 0, false
  if forecast <= L[SOFT] then
    -- at or below the soft capacity: factor 0
  elseif forecast > L[HARD] then
    outcome, f = 2, PPM
  else
    outcome = 2
    f, computed = factor(L)
  end
  L[OUTCOME], L[F], L[COMPUTED] = outcome, f, computed
  if f > setf then setf = f end
end
local allowed = draw >= setf
if not allowed and ARGV[4 + 6 * nk] == 'writeback' then allowed = true end

local reply = {allowed and 1 or 0}
for i = 1, nk do
  local L = ls[i]
  if write then record(L, allowed) end
  local accepted = L[USED] - L[DECLINED]
  local retry = 0
  if not allowed and not L[NEVER] and accepted + L[COST] > L[SOFT] then
    retry = retryAfter(L, accepted, L[SOFT])
  end
  local reset = 0
  if L[LIVE] then reset = L[NEWEST] + L[SP] - now end
  local j = #reply
  reply[j + 1] = L[OUTCOME]
  reply[j + 2] = draw < L[F] and 1 or 0
  reply[j + 3] = math.max(L[SOFT] - accepted, 0)
  reply[j + 4] = retry
  reply[j + 5] = reset
  reply[j + 6] = L[F]
end
return reply
