-- abs_inc.lua: one decision of the absolute strategy (DESIGN.md §3). It is
-- the Redis twin of internal/window's State.IncAbsolute (ARGV[4] > 0) and
-- State.IsAllowedAbsolute (ARGV[4] = 0) and must compute exactly what they
-- compute.
--
-- KEYS[1]  the key's hash, <prefix>:{<escaped key>}:abs:h
-- ARGV[1]  now in ms, or 0 to read Redis TIME
-- ARGV[2]  W, the window in ms
-- ARGV[3]  B, the bucket in ms
-- ARGV[4]  C, the capacity; 0 answers IsAllowed: the capacity stored by the
--          key's latest Inc is used, and a key with no live bucket is
--          allowed with every number 0 (ARGV[5] must then be 0)
-- ARGV[5]  n, the cost; 0 is a peek for one unit that writes nothing
-- ARGV[6]  the PEXPIRE of every write in ms: W + B (longer only when the
--          caller sends its own clock in ARGV[1], see internal/redisx.TTLMs)
--
-- The hash (docs/data-model.md): meta fields "c" the stored capacity, "u"
-- the sum of all stored bucket counts, "o" the oldest stored bucket start,
-- "n" the newest bucket's start and "nc" its count; and one field
-- "<start ms>" (decimal) → count for every older bucket. The newest bucket
-- lives in "n"/"nc" until a newer one opens, so that joining it (nearly
-- every call on a busy key) is one HSET of two fields at the front of the
-- hash. Buckets with now - start >= W are dead: they are ignored at once
-- and deleted by the next write that finds them (only when now - o >= W is
-- the hash scanned). A hash without a live bucket is an absent key.
--
-- Reply: {limit, remaining, reset_after_ms} when admitted (outcome allowed,
--         and IsAllowed on an absent key, all 0); otherwise
--         {outcome (1 rejected), allowed (0), limit, remaining,
--         retry_after_ms, reset_after_ms, factor_ppm (always 0), never (0/1)}
--         (internal/redisx.Decision reads both)
if redis.replicate_commands then redis.replicate_commands() end

local h = KEYS[1]
local now = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
local b = tonumber(ARGV[3])
local c = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Integers as decimal strings: tostring would print large doubles in
-- exponent notation.
local function str(x) return string.format('%d', x) end

local m = redis.call('HMGET', h, 'c', 'u', 'o', 'n', 'nc')
local live, stale, scanned = false, false, false
local stored, used, oldest, newest, ncount = 0, 0, 0, 0, 0
local buckets -- live buckets {start, count}, newest included, once scanned
local dead -- fields of dead buckets, deleted by a writing call

-- scan reads every stored bucket: it keeps the live ones in buckets, sums
-- them in used, notes the dead ones and returns the oldest live start. The
-- newest bucket (meta fields) is live whenever scan runs.
local function scan()
  local all = redis.call('HGETALL', h)
  local first = newest
  buckets, used, dead, scanned = {{newest, ncount}}, ncount, {}, true
  for i = 1, #all, 2 do
    local st = tonumber(all[i])
    if st then
      if now - st >= w then
        dead[#dead + 1] = all[i]
      else
        local cnt = tonumber(all[i + 1])
        buckets[#buckets + 1] = {st, cnt}
        used = used + cnt
        if st < first then first = st end
      end
    end
  end
  return first
end

if m[4] then
  newest = tonumber(m[4])
  ncount = tonumber(m[5])
  if ncount == nil or now - newest >= w then
    stale = true -- every bucket is dead (or the hash is damaged): absent
  else
    live = true
    stored = tonumber(m[1]) or 0
    used = tonumber(m[2])
    oldest = tonumber(m[3])
    if used == nil or oldest == nil or now - oldest >= w then
      oldest = scan()
    end
  end
end

if c == 0 then
  if not live then return {0, 0, 0} end
  c = stored
end

local cost = n
if cost < 1 then cost = 1 end
local never = cost > c
local allowed = (not never) and used + cost <= c

-- Writes: only for n > 0, never for a peek or IsAllowed.
if n > 0 then
  local wrote = false
  if stale then
    redis.call('DEL', h)
    wrote = true
  elseif dead and #dead > 0 then
    for i = 1, #dead, 1000 do
      redis.call('HDEL', h, unpack(dead, i, math.min(i + 999, #dead)))
    end
    wrote = true
  end
  if allowed then
    used = used + n
    if live and now - newest < b then
      -- Join the newest bucket: the fields that change, and the capacity
      -- and oldest start only when they moved.
      ncount = ncount + n
      if stored ~= c then
        redis.call('HSET', h, 'nc', str(ncount), 'u', str(used), 'c', str(c), 'o', str(oldest))
      elseif scanned then
        redis.call('HSET', h, 'nc', str(ncount), 'u', str(used), 'o', str(oldest))
      else
        redis.call('HSET', h, 'nc', str(ncount), 'u', str(used))
      end
    elseif live then
      -- Open a bucket: the newest one becomes an ordinary field.
      redis.call('HSET', h, str(newest), str(ncount), 'n', str(now), 'nc', str(n), 'u', str(used),
        'c', str(c), 'o', str(oldest))
      newest, ncount = now, n
    else
      oldest, newest, ncount, live = now, now, n, true
      redis.call('HSET', h, 'c', str(c), 'u', str(used), 'o', str(oldest), 'n', str(now), 'nc', str(n))
    end
    wrote = true
  elseif live and (scanned or stored ~= c) then
    -- the latest rate wins, even on a refusal
    redis.call('HSET', h, 'c', str(c), 'u', str(used), 'o', str(oldest))
    wrote = true
  end
  if wrote and live then
    redis.call('PEXPIRE', h, str(ttl))
  end
end

local reset = 0
if live then reset = newest + w - now end

if allowed then
  return {c, c - used, reset}
end

local remaining = c - used
if remaining < 0 then remaining = 0 end
local retry = 0
if not never then
  -- Walk the live buckets oldest first until enough has expired for cost
  -- to fit. A refusal with cost <= c means used > 0: the key is live.
  if not buckets then
    local first = ncount
    if oldest ~= newest then first = tonumber(redis.call('HGET', h, str(oldest))) or 0 end
    if first > 0 and (used - first + cost <= c or first >= used) then
      retry = oldest + w - now
    else
      scan()
    end
  end
  if buckets then
    table.sort(buckets, function(x, y) return x[1] < y[1] end)
    local freed = 0
    for i = 1, #buckets do
      local cnt = buckets[i][2]
      if cnt ~= 0 then
        freed = freed + cnt
        if used - freed + cost <= c or freed >= used then
          retry = buckets[i][1] + w - now
          break
        end
      end
    end
  end
end
local nv = 0
if never then nv = 1 end
return {1, 0, c, remaining, retry, reset, 0, nv}
