-- sup_allowed.lua: IsAllowed of the suppressed strategy, read-only: what
-- internal/window's State.IsAllowedSuppressed computes, writing nothing.
--
-- KEYS[1]  <prefix>:{<key>}:sup:h, the key's hash (sup_inc.lua)
-- ARGV[1]  now in ms; an empty string reads Redis TIME
-- ARGV[2]  W, the window in ms
-- ARGV[3]  the suppression cache period in ms; 0 = no cache
-- ARGV[4]  B, the bucket in ms
--
-- Reply: for one more unit at the capacities the key's latest Inc stored,
--         {limit, remaining, reset after ms} when admitted without
--         suppression (all 0 without a live bucket), else {outcome,
--         allowed, limit, remaining, retry after ms, reset after ms,
--         factor ppm, never} (see sup_inc.lua).
local PPM = 1000000
local h = KEYS[1]
-- include now.lua
local w = tonumber(ARGV[2])
local sp = w + tonumber(ARGV[4])
local cache = tonumber(ARGV[3])

local function fmt(v) return string.format('%d', v) end

-- "m" and "k" as in sup_inc.lua; a single hash's "k" may end in the cursor.
local mk = redis.call('HMGET', h, 'm', 'k', 'v')
local us, xs, os, ns, ncs, nds, cs, hcs, fs, fts
if mk[1] then us, xs, os, ns, ncs, nds = string.match(mk[1], '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$') end
if mk[2] then cs, hcs, fs, fts = string.match(mk[2], '^(%d+) (%d+) (%d+) (%-?%d+)[ %d]*$') end
if mk[3] and mk[3] ~= 's2 ' .. ARGV[2] .. ' ' .. ARGV[4] then
  -- another record: as sup_inc.lua
  local rw, rb = string.match(mk[3], '^s2 (%d+) (%d+)$')
  if not rw then return redis.error_reply('SLUICELAYOUT ' .. mk[3]) end
  if ns and cs and now - ns < rw + rb then
    return redis.error_reply('SLUICEWINDOW ' .. mk[3] .. ' s2 ' .. ARGV[2] .. ' ' .. ARGV[4])
  end
  return {0, 0, 0}
end
local newest = tonumber(ns)
if newest == nil or cs == nil or now - newest >= sp or newest - now >= sp then
  return {0, 0, 0}
end
local ncount, ndec = ncs + 0, nds + 0
local used, declined, oldest = us + 0, xs + 0, os + 0
-- 2^53 or more (inexact in a double): another client's count
if used >= 9007199254740992 or ncount >= 9007199254740992 or declined >= 9007199254740992 then
  return redis.error_reply('SLUICESTATE ' .. h .. ' m ' .. mk[1])
end
local fppm, fat = fs + 0, fts + 0
local soft, hard = cs + 0, hcs + 0
local P = 4294967296
local k, bs, bo, bd -- after a scan: the live buckets, oldest first

local function offered(v)
  v = v + 0
  if v >= P then return (v - v % P) / P end
  if v < 0 then return -v end
  return v
end

-- scan: sup_scan.lua's scanBuckets, setting k, bs, bo, bd
local function scan()
  -- include sup_scan.lua
  local su, sd, _
  _, su, sd, k, bs, bo, bd = scanBuckets(h, now, sp, newest, ncount, ndec)
  return su, sd
end

if now - oldest >= sp then
  used, declined = scan()
  oldest = bs[1]
end

local function factor()
  if cache > 0 and fppm ~= nil and fat ~= nil and fat > 0 and now - fat < cache then return fppm end -- ft 0: none
  local r = math.min(w, 1000)
  local recent = 0
  if now - oldest < r then
    recent = used
  elseif now - newest < r then
    if not k then scan() end
    for i = k, 1, -1 do
      if now - bs[i] >= r then break end
      recent = recent + bo[i]
    end
  end
  local mx = math.max(used * r, recent * w)
  if mx <= 0 then return 0 end
  local f = 1 - soft * r / mx
  local ppm = math.floor(f * PPM + 0.5)
  return math.min(math.max(ppm, 0), PPM)
end

local function retryAfter(held, cost, cap)
  if not k then
    local acc = ncount - ndec
    if oldest ~= newest then
      local v = redis.call('HMGET', h, fmt(oldest), 'd' .. fmt(oldest))
      acc = (v[1] and offered(v[1]) or 0) - (tonumber(v[2]) or 0)
    end
    if acc ~= 0 and (held - acc + cost <= cap or acc >= held) then
      return oldest + sp - now
    end
    scan()
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

local accepted = used - declined
local remaining = math.max(soft - accepted, 0)
local reset = newest + sp - now
if accepted + 1 <= soft then
  return {soft, remaining, reset}
end
local f = PPM
if accepted + 1 <= hard then f = factor() end
return {2, 0, soft, remaining, retryAfter(accepted, 1, soft), reset, f, 0}
