-- abs_set.lua: one decision of the absolute strategy on a set of limits
-- (docs/algorithms.md, Sets of limits). It is the Redis twin of
-- internal/window's IncAbsoluteSet and must compute exactly what it
-- computes: the call is admitted only if every limit has room for it, and
-- then recorded in every limit; a refusal records nothing.
--
-- KEYS[i]  the hash of limit i, <prefix>:{<escaped key>}:abs:h:<name>, for
--          i = 1..k (k <= 8); every hash has the layout of abs_inc.lua's
-- ARGV[1]  now in ms, or an empty string to read Redis TIME
-- ARGV[2]  n, the cost; 0 is a peek for one unit that writes nothing; at
--          most the largest capacity + 1 (a request that can never fit is
--          sent so)
-- ARGV[3 + 4(i-1) ..]  for limit i: W, B, C (a plain decimal, stored as
--          sent) and the PEXPIRE of its writes in ms (W + B, longer only
--          when the caller sends its own clock)
--
-- Reply: {allowed (0/1), then per limit: refused (0/1), remaining,
-- retry_after_ms, reset_after_ms}. Refused is set for a limit without
-- room (or whose C is below n); its retry is the time until it has room,
-- 0 when it never will. Limit and never are known to the caller.
--
-- Each hash is handled as abs_inc.lua handles its one hash, with the same
-- fields, the same expiry along the links (at most 8 HGETs, else one
-- HGETALL) and the same writes, each followed by a PEXPIRE of the
-- limit's W + B (a join renews it too: two sets may give one limit name
-- different windows, and the TTL follows the latest write's, as the local
-- provider's sweep does),
-- so that the cost per limit stays what abs_inc.lua costs (docs/algorithms.md, Bounded work); see
-- abs_inc.lua for the layout and the reasons behind each step.
if redis.replicate_commands then redis.replicate_commands() end

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = ARGV[1] + 0
end
local n = ARGV[2] + 0
local cost = n
if cost < 1 then cost = 1 end
local fmt = string.format
local P = 4294967296 -- 2^32: a closed bucket's value is count * P + link
local LINKS = 8

-- scan reads every stored bucket of limit l in one HGETALL (abs_inc.lua's
-- scan): live ones into l.starts and l.counts, oldest first, the newest
-- from "m" last; dead ones into l.dead.
local function scan(l)
  local all = redis.call('HGETALL', l.h)
  local starts, counts, k = {}, {}, 0
  local used, dead, oldest = l.ncount, {}, l.newest
  local sorted, prev = true, -1 / 0
  for i = 1, #all, 2 do
    local f = all[i]
    local st = tonumber(f)
    if st then
      if now - st >= l.sp then
        dead[#dead + 1] = f
      else
        local v = all[i + 1] + 0
        if v >= P then
          v = (v - v % P) / P
        elseif v < 0 then
          v = -v
        end
        k = k + 1
        starts[k], counts[k] = st, v
        used = used + v
        if st < prev then sorted = false end
        prev = st
      end
    end
  end
  if not sorted then
    local by = {}
    for i = 1, k do by[starts[i]] = counts[i] end
    table.sort(starts)
    for i = 1, k do counts[i] = by[starts[i]] end
  end
  if k > 0 then oldest = starts[1] end
  k = k + 1
  starts[k], counts[k] = l.newest, l.ncount
  l.starts, l.counts, l.k = starts, counts, k
  l.used, l.dead, l.oldest = used, dead, oldest
  l.ofield = fmt('%d', oldest)
end

-- load reads limit i's hash and expires it at now, as abs_inc.lua does.
local function load(i)
  local a = 3 + 4 * (i - 1)
  -- every field is named in the constructor, so the table is sized once
  local l = {h = KEYS[i], b = ARGV[a + 1] + 0, c = ARGV[a + 2] + 0, cs = ARGV[a + 2], ttl = ARGV[a + 3],
    sp = ARGV[a] + ARGV[a + 1], live = false, stale = false, used = 0, oldest = 0, newest = 0, ncount = 0,
    moved = false, ns = false, ofield = false, dead = false, never = false, fits = false,
    starts = false, counts = false, k = 0}
  local mv = redis.call('HGET', l.h, 'm')
  local cs, us, os, ns, ncs
  if mv then cs, us, os, ns, ncs = string.match(mv, '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+)$') end
  local fresh = false
  if ns then
    l.newest = ns + 0
    if now - l.newest >= l.sp then
      l.stale = true
    else
      l.live = true
      l.used, l.oldest, l.ncount = us + 0, os + 0, ncs + 0
      fresh = now - l.oldest < l.sp
    end
  elseif mv then
    l.stale = true
  end
  l.moved = cs ~= l.cs
  l.ns, l.ofield = ns, os
  if l.live and not fresh then
    local dead = {}
    fresh = true
    while now - l.oldest >= l.sp do
      if #dead >= LINKS then fresh = false break end
      local v = redis.call('HGET', l.h, l.ofield)
      if v then v = v + 0 end
      local link = v and v % P
      if not v or v < P or link < 1 then fresh = false break end
      l.used = l.used - (v - link) / P
      dead[#dead + 1] = l.ofield
      l.oldest = l.oldest + link
      l.ofield = fmt('%d', l.oldest)
    end
    if fresh and (l.oldest > l.newest or l.oldest == l.newest and l.used ~= l.ncount) then fresh = false end
    l.dead = dead
    if not fresh then scan(l) end
  end
  l.never = cost > l.c
  l.fits = (not l.never) and l.used + cost <= l.c
  return l
end

-- write records (or, on a refusal, stores the expiry and the capacity of)
-- limit l, as abs_inc.lua's writes do.
local function write(l, allowed)
  local wrote = false
  if l.stale then
    redis.call('DEL', l.h)
    wrote = true
  elseif l.dead and #l.dead > 0 then
    for i = 1, #l.dead, 1000 do
      redis.call('HDEL', l.h, unpack(l.dead, i, math.min(i + 999, #l.dead)))
    end
    wrote = true
  end
  if allowed then
    l.used = l.used + n
    if not l.live then
      local s0 = fmt('%d', now)
      redis.call('HSET', l.h, 'm', l.cs .. ' ' .. ARGV[2] .. ' ' .. s0 .. ' ' .. s0 .. ' ' .. ARGV[2])
      l.newest, l.live = now, true
    elseif now - l.newest < l.b then
      redis.call('HSET', l.h, 'm', fmt('%s %d %s %s %d', l.cs, l.used, l.ofield, l.ns, l.ncount + n))
    else
      local closed = -l.ncount
      if l.ncount < 2097152 and now - l.newest < P then closed = l.ncount * P + (now - l.newest) end
      redis.call('HSET', l.h, l.ns, fmt('%d', closed), 'm', fmt('%s %d %s %d %s', l.cs, l.used, l.ofield, now, ARGV[2]))
      l.newest = now
    end
    wrote = true
  elseif l.live and (l.dead or l.moved) then
    redis.call('HSET', l.h, 'm', fmt('%s %d %s %s %d', l.cs, l.used, l.ofield, l.ns, l.ncount))
    wrote = true
  end
  if wrote and l.live then
    redis.call('PEXPIRE', l.h, l.ttl)
  end
end

-- retry is the time until limit l has room for cost (abs_inc.lua's walk:
-- the oldest bucket alone often frees enough, one HGET).
local function retry(l)
  if not l.starts then
    local first = l.ncount
    if l.oldest ~= l.newest then
      local v = redis.call('HGET', l.h, l.ofield)
      v = v and v + 0 or 0
      if v >= P then
        first = (v - v % P) / P
      elseif v < 0 then
        first = -v
      else
        first = v
      end
    end
    if first > 0 and (l.used - first + cost <= l.c or first >= l.used) then
      return l.oldest + l.sp - now
    end
    scan(l)
  end
  local freed = 0
  for i = 1, l.k do
    local cnt = l.counts[i]
    if cnt ~= 0 then
      freed = freed + cnt
      if l.used - freed + cost <= l.c or freed >= l.used then
        return l.starts[i] + l.sp - now
      end
    end
  end
  return 0
end

local ls = {}
local allowed = true
for i = 1, #KEYS do
  local l = load(i)
  ls[i] = l
  if not l.fits then allowed = false end
end

local out = {allowed and 1 or 0}
for i = 1, #KEYS do
  local l = ls[i]
  if n > 0 then write(l, allowed) end
  local refused, rt = 0, 0
  if not l.fits then
    refused = 1
    if not l.never then rt = retry(l) end
  end
  local remaining = l.c - l.used
  if remaining < 0 then remaining = 0 end
  local reset = 0
  if l.live then reset = l.newest + l.sp - now end
  out[#out + 1] = refused
  out[#out + 1] = remaining
  out[#out + 1] = rt
  out[#out + 1] = reset
end
return out
