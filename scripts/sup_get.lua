-- sup_get.lua: the usage of a suppressed key. Read-only.
--
-- KEYS[1]  <prefix>:{<key>}:sup:h, the key's hash (fields: see sup_inc.lua)
-- ARGV[1]  now in ms; an empty string reads Redis TIME
-- ARGV[2]  W, the window in ms
-- ARGV[3]  B, the bucket in ms
--
-- Reply: {accepted, declined, soft capacity} over the live buckets;
--        {0, 0, 0} for a key with no live bucket.

local h = KEYS[1]
local now = tonumber(ARGV[1])
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local w = tonumber(ARGV[2])
local sp = w + tonumber(ARGV[3]) -- a bucket is live while now - start < W + B

local m = redis.call('HMGET', h, 'u', 'x', 'o', 'n', 'c', 'nc', 'nd')
local nc = m[6] and tonumber(m[6])
if not m[4] or not nc or not m[3] or now - tonumber(m[4]) >= sp then
  return {0, 0, 0}
end
local used = tonumber(m[1] or 0)
local declined = tonumber(m[2] or 0)
local P = 4294967296

if now - tonumber(m[3]) >= sp then
  -- Expired buckets are still stored: count only the live ones, starting
  -- with the newest ("nc", "nd"), which is live, in one pass over the hash
  -- (at most 2 (W/B + 1) bucket fields: docs/algorithms.md, Bounded work).
  -- A closed bucket's value is offered * 2^32 + link or -offered (see
  -- sup_inc.lua; a plain count is an earlier layout's); "d<start>" holds
  -- its declined units and lives and dies with it.
  used, declined = nc, tonumber(m[7] or 0)
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
return {used - declined, declined, tonumber(m[5] or 0)}
