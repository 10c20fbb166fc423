-- sup_allowed.lua: IsAllowed of the suppressed strategy. Read-only: it
-- computes what internal/window's State.IsAllowedSuppressed computes and
-- writes nothing, not even the cleanup of expired buckets or the factor
-- cache.
--
-- KEYS[1]  <prefix>:{<key>}:sup:h, the key's hash (fields: see sup_inc.lua)
-- ARGV[1]  now in ms; an empty string reads Redis TIME
-- ARGV[2]  W, the window in ms
-- ARGV[3]  the suppression cache period in ms; 0 = no cache
-- ARGV[4]  B, the bucket in ms
--
-- Reply: for one more unit at the capacities stored by the key's latest
--         Inc, {limit, remaining, reset after ms} when it is admitted
--         without suppression (a key with no live bucket: all 0), else
--         {outcome, allowed, limit, remaining, retry after ms, reset after
--         ms, factor ppm, never}, all integers (see sup_inc.lua).

local PPM = 1000000
local h = KEYS[1]
local now = tonumber(ARGV[1])
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local w = tonumber(ARGV[2])
local sp = w + tonumber(ARGV[4]) -- a bucket is live while now - start < W + B
local cache = tonumber(ARGV[3])

local function num(v)
  if v then return tonumber(v) end
  return nil
end

local function fmt(v) return string.format('%d', v) end

local m = redis.call('HMGET', h, 'u', 'x', 'o', 'n', 'f', 'ft', 'c', 'hc', 'nc', 'nd')
local newest = num(m[4])
local ncount, ndec = num(m[9]), num(m[10]) or 0
if newest == nil or ncount == nil or not m[3] or now - newest >= sp then
  return {0, 0, 0}
end
local used = num(m[1]) or 0
local declined = num(m[2]) or 0
local oldest = num(m[3])
local fppm, fat = num(m[5]), num(m[6])
local soft = num(m[7]) or 0
local hard = num(m[8]) or 0
local buckets -- after a scan: the live buckets {start, count, declined}, oldest first

-- offered reads a closed bucket's offered units from its value, offered *
-- 2^32 + link or -offered (see sup_inc.lua; a plain count is an earlier
-- layout's).
local function offered(v)
  v = tonumber(v)
  if v >= 4294967296 then return (v - v % 4294967296) / 4294967296 end
  if v < 0 then return -v end
  return v
end

local function scan()
  local all = redis.call('HGETALL', h)
  local count, dec, starts = {}, {}, {}
  for i = 1, #all, 2 do
    local f = all[i]
    local c = string.byte(f, 1)
    if c >= 48 and c <= 57 or c == 45 then
      local s = tonumber(f)
      count[s] = offered(all[i + 1])
      starts[#starts + 1] = s
    elseif c == 100 then
      dec[tonumber(string.sub(f, 2))] = tonumber(all[i + 1])
    end
  end
  table.sort(starts)
  local out = {}
  for i, s in ipairs(starts) do out[i] = {s, count[s], dec[s] or 0} end
  out[#out + 1] = {newest, ncount, ndec} -- the newest bucket, in meta fields
  return out
end

if now - oldest >= sp then
  -- Expired buckets are still stored: leave them, count only live ones.
  buckets = {}
  used, declined = 0, 0
  for _, bk in ipairs(scan()) do
    if now - bk[1] < sp then
      buckets[#buckets + 1] = bk
      used = used + bk[2]
      declined = declined + bk[3]
    end
  end
  oldest = buckets[1][1]
end

local function factor()
  if cache > 0 and fppm ~= nil and fat ~= nil and fat > 0 and now - fat < cache then return fppm end -- ft 0: none
  local r = math.min(w, 1000)
  local recent = 0
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
  local mx = math.max(used * r, recent * w)
  if mx <= 0 then return 0 end
  local f = 1 - soft * r / mx
  local ppm = math.floor(f * PPM + 0.5)
  return math.min(math.max(ppm, 0), PPM)
end

local function retryAfter(held, cost, cap)
  if not buckets then
    local acc = ncount - ndec
    if oldest ~= newest then
      local v = redis.call('HMGET', h, fmt(oldest), 'd' .. fmt(oldest))
      acc = (v[1] and offered(v[1]) or 0) - (num(v[2]) or 0)
    end
    if acc ~= 0 and (held - acc + cost <= cap or acc >= held) then
      return oldest + sp - now
    end
    buckets = scan()
  end
  local freed = 0
  for _, bk in ipairs(buckets) do
    local u = bk[2] - bk[3]
    if u ~= 0 then
      freed = freed + u
      if held - freed + cost <= cap or freed >= held then return bk[1] + sp - now end
    end
  end
  return 0
end

local accepted = used - declined
local remaining = math.max(soft - accepted, 0)
local reset = newest + sp - now
if accepted + 1 <= soft then
  return {soft, remaining, reset}
end
local f = PPM
if accepted + 1 <= hard then f = factor() end
return {2, 0, soft, remaining, retryAfter(accepted, 1, soft), reset, f, 0}
