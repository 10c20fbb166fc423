-- A prototype, not used by sluice: the absolute Inc of abs_inc.lua on a
-- string value "<c> <u> <o> <newest start> <newest count>;" followed by
-- the closed buckets "<start> <count>;", oldest first. One GET and one
-- SET PX instead of HMGET, HINCRBY, HSET and PEXPIRE; every write copies
-- the whole string, so a call costs O(W/B) bytes. Same ARGV as abs_inc.lua.
if redis.replicate_commands then redis.replicate_commands() end
local h = KEYS[1]
local now = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
local b = tonumber(ARGV[3])
local c = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local v = redis.call('GET', h)
local live, stale, trimmed = false, false, false
local stored, used, oldest, ns, nc = 0, 0, 0, 0, 0
local body = ''
if v then
  local _, e, s1, s2, s3, s4, s5 = string.find(v, '^(%d+) (%d+) (%d+) (%d+) (%d+);')
  if e and now - tonumber(s4) < w then
    live = true
    stored, used, oldest, ns, nc = tonumber(s1), tonumber(s2), tonumber(s3), tonumber(s4), tonumber(s5)
    if e < #v then body = string.sub(v, e + 1) end
    if now - oldest >= w then
      local pos = 1
      oldest = ns
      while true do
        local _, e2, a, cnt = string.find(body, '^(%d+) (%d+);', pos)
        if not e2 then break end
        a = tonumber(a)
        if now - a < w then oldest = a break end
        used = used - tonumber(cnt)
        pos = e2 + 1
      end
      body = string.sub(body, pos)
      trimmed = true
    end
  else
    stale = true
  end
end

if c == 0 then
  if not live then return {0, 1, 0, 0, 0, 0, 0, 0} end
  c = stored
end
local cost = n
if cost < 1 then cost = 1 end
local never = cost > c
local allowed = (not never) and used + cost <= c

if n > 0 then
  local write = false
  if allowed then
    used = used + n
    if live and now - ns < b then
      nc = nc + n
    else
      if live then body = body .. string.format('%d %d;', ns, nc) else oldest, body = now, '' end
      ns, nc, live = now, n, true
    end
    write = true
  elseif live then
    write = trimmed or stored ~= c
  end
  if write then
    redis.call('SET', h, string.format('%d %d %d %d %d;', c, used, oldest, ns, nc) .. body, 'PX', ARGV[6])
  elseif stale then
    redis.call('DEL', h)
  end
end

local reset = 0
if live then reset = ns + w - now end
if allowed then return {0, 1, c, c - used, 0, reset, 0, 0} end
local remaining = c - used
if remaining < 0 then remaining = 0 end
local retry = 0
if not never then
  local freed = 0
  for a, cnt in string.gmatch(body, '(%d+) (%d+);') do
    cnt = tonumber(cnt)
    if cnt ~= 0 then
      freed = freed + cnt
      if used - freed + cost <= c or freed >= used then retry = tonumber(a) + w - now break end
    end
  end
  if retry == 0 then retry = ns + w - now end
end
local nv = 0
if never then nv = 1 end
return {1, 0, c, remaining, retry, reset, 0, nv}
