-- clean.lua: one step of the cleanup loop (package cleanup) on one limiter
-- hash of either strategy. It decides and acts in one atomic call, so a
-- concurrent Inc sees the hash either before or after it, never half done:
--
--   - a hash with no live bucket (now - n >= W + B) is UNLINKed;
--   - a hash without a TTL gets the one its newest bucket implies: it
--     expires at the instant that bucket dies, n + W + B (PEXPIREAT; never
--     more than 2 (W + B) from now: a hybrid lease's bucket may start up to
--     W/4 after now, docs/algorithms.md, Hybrid leases);
--   - a live hash holding more than ARGV[6] dead buckets loses them, the
--     meta fields rewritten exactly as the provider's own expiry rewrites
--     them (abs_inc.lua, sup_inc.lua), in bounded steps.
--
-- A bucket is live while now - start < W + B (docs/algorithms.md). Removing
-- only dead buckets, and keeping the totals equal to what the remaining
-- buckets hold, never changes what a decision computes: the scripts of both
-- providers ignore dead buckets and drop them themselves on their next
-- write.
--
-- KEYS[1]  the hash: <prefix>:{<escaped key>}:<strategy>:h, or the hash of
--          one limit of a set, <prefix>:{<escaped key>}:<strategy>:h:<limit>
--          (the same layout)
-- ARGV[1]  now in ms, or an empty string to read Redis TIME
-- ARGV[2]  the layout: "abs" (one meta field "m", "<c> <u> <o> <n> <nc>",
--          followed on a single hash perhaps by " <z>", see abs_inc.lua,
--          and on a set's limit by " <t>", its TTL span) or "sup" ("m" =
--          "<u> <x> <o> <n> <nc> <nd>" beside "k", which on a single hash
--          may end with the RetryAfter cursor and on a set's limit ends in
--          t); docs/data-model.md
-- ARGV[3]  the caller's W + B in ms, or 0 when it gave none: it only
--          makes the script more careful (the larger of it and the hash's
--          own is used)
-- ARGV[4]  the longest W + B any accepted configuration has: the span of
--          a hash whose window is unknown, which is never deleted or
--          trimmed, only given a TTL if it has none
--
-- The hash's own window comes from its record "v", "a2 <W> <B>" or
-- "s2 <W> <B>" (abs_inc.lua, sup_inc.lua); a set's limit's hash without
-- a record has its TTL span t (written by every version that wrote set
-- hashes: the largest W + B of its writes), which stands for W + B. A
-- single hash without a record (written by a version before the record)
-- has an unknown window. A record of another layout is state 3.
-- ARGV[5]  ms added to a TTL this script sets (the providers' slack under
--          a caller's clock, internal/redisprov.TTLMs; else 0)
-- ARGV[6]  the trim threshold: a live hash of at most 1,024 fields is
--          trimmed only when it holds more than this many dead buckets
-- ARGV[7]  the most dead buckets one call follows along the links of a
--          larger hash
-- ARGV[8]  1: dry run, write nothing and report what would be done
-- ARGV[9]  the caller's B in ms, or 0 (the hash's recorded B is used
--          when smaller or when this is 0): buckets open at least B apart, so
--          a hash whose oldest bucket died less than (ARGV[6] + 1) × B ago
--          cannot hold more than ARGV[6] dead ones, and is not read
-- ARGV[10…] (optional) field names read by HSCAN: remove those that are
--          dead buckets (and their declined counts), for a hash of more
--          than 1,024 fields whose links are broken (reply more = 2)
--
-- Reply: {state, ttl, trimmed, more, known, w, b, pttl}, all integers:
--   state    0 no such key; 1 live (kept, perhaps trimmed or given a TTL);
--            2 no live bucket: deleted (dry run: would be); 3 not a hash of
--            the layout (no meta, unreadable meta, another type): untouched
--   ttl      the TTL set in ms, 0 when none was (the key had one)
--   trimmed  dead buckets removed (dry run: found)
--   more     0 done; 1 dead buckets remain along the links: call again;
--            2 the links are broken and the hash is too large to read in
--            one call: call again with its fields (ARGV[10…]) in batches
--   known    1 when the hash's window is known (its record, or a set's t)
--   w, b     the recorded W and B in ms (0, 0 without a record; a set's
--            hash without one: w = t, b = 0)
--   pttl     the hash's PTTL in ms before the call (-1: none; -2: not
--            read), which a dry run lists beside what it would delete
--
-- Work: a live key with nothing to do costs TYPE, the meta read and PTTL;
-- trimming reads at most ARGV[7] buckets along the links, or a hash of at
-- most 1,024 fields whole (docs/algorithms.md, Bounded work); deletes go
-- 1,000 fields per HDEL.
if redis.replicate_commands then redis.replicate_commands() end

local h = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = ARGV[1] + 0
end
local abs = ARGV[2] == 'abs'
local csp, longest, slack = ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0
local threshold, step, dry = ARGV[6] + 0, ARGV[7] + 0, ARGV[8] == '1'
local cbucket = ARGV[9] + 0
-- what the reply reports besides the state (see the header)
local known, rw, rb, pttl = 0, 0, 0, -2
local function reply(state, ttl, trimmed, more)
  return {state, ttl, trimmed, more, known, rw, rb, pttl}
end
local P = 4294967296 -- 2^32: a closed bucket's value is count * P + link
local SCANMAX = 1024 -- a hash of at most this many fields is read whole
local fmt = string.format

local typ = redis.call('TYPE', h)['ok']
if typ == 'none' then return reply(0, 0, 0, 0) end
if typ ~= 'hash' then return reply(3, 0, 0, 0) end

-- The meta values, packed in "m" (strings as stored). abs: c, u, o, n,
-- nc; sup: u, x (declined), o, n, nc, nd (its "k", capacities and cached
-- factor, is no concern of the cleanup).
local cs, us, xs, os, ns, ncs, nds, zs, ts
local used, declined, oldest, newest, ncount, ndec
-- A set's limit's hash is <...>:h:<limit>; a single hash ends in ":h" (an
-- escaped key holds no ":").
local set = string.sub(h, -2) ~= ':h'
local mr = redis.call('HMGET', h, 'm', 'v', 'k')
local mv, vs = mr[1], mr[2]
if abs then
  if mv then
    -- the sixth value: a single hash's z, the newest bucket that may hold
    -- no unit; a set's limit's t, its TTL span
    local sixth
    cs, us, os, ns, ncs, sixth = string.match(mv, '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) ?(%-?%d*)$')
    if sixth and sixth ~= '' then
      if set then ts = sixth else zs = sixth end
    end
  end
  nds = '0'
  xs = '0'
elseif mv then
  us, xs, os, ns, ncs, nds = string.match(mv, '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$')
end
if not ns then return reply(3, 0, 0, 0) end
used, declined, oldest, newest, ncount, ndec = us + 0, xs + 0, os + 0, ns + 0, ncs + 0, nds + 0
if set and not abs and mr[3] then ts = string.match(mr[3], '^%d+ %d+ %d+ %-?%d+ (%d+)$') end

-- The window the hash is judged by: its own (the record, or a set's t),
-- made longer by the caller's; unknown without either.
local own, sp, bucket = false, longest, 0
if vs then
  local w, b = string.match(vs, abs and '^a2 (%d+) (%d+)$' or '^s2 (%d+) (%d+)$')
  if not w then return reply(3, 0, 0, 0) end
  rw, rb = w + 0, b + 0
  own, sp, bucket = true, rw + rb, rb
elseif set and ts and ts ~= '0' then
  rw = ts + 0
  own, sp = true, rw
end
if own then
  known = 1
  if set and ts and ts + 0 > sp then sp = ts + 0 end
  if csp > sp then sp = csp end
  if cbucket > 0 and (bucket == 0 or cbucket < bucket) then bucket = cbucket end
end
pttl = redis.call('PTTL', h)

-- No live bucket: the key is absent to every call of its provider.
if now - newest >= sp then
  if own then
    if not dry then redis.call('UNLINK', h) end
    return reply(2, 0, 0, 0)
  end
end

-- A hash without a TTL gets the one its newest bucket implies.
local ttl = 0
if pttl == -1 then
  ttl = newest + sp - now
  -- a newest start ahead of the clock: a forward-dated lease's (less
  -- than W + B ahead) keeps its whole life, a wilder one is cut
  if ttl > 2 * sp then ttl = 2 * sp end
  if ttl < 1 then ttl = 1 end -- only with an unknown window: dead under any
  ttl = ttl + slack
  if not dry then
    -- a set's limit: its next write must set the TTL anew (t = 0 matches
    -- no W + B; abs_set.lua and sup_set.lua skip PEXPIRE only while t
    -- covers their W + B): t is the sixth value of an absolute "m", the
    -- fifth of a suppressed "k"; a hash without a record keeps its t,
    -- which is its record (the TTL set here ends no earlier than n + t)
    if ts and ts ~= '0' and vs then
      ts = '0'
      redis.call('HSET', h, 'm', cs .. ' ' .. us .. ' ' .. os .. ' ' .. ns .. ' ' .. ncs .. ' ' .. ts)
    elseif set and not abs and vs then
      local kv = mr[3]
      local k4 = kv and string.match(kv, '^(%d+ %d+ %d+ %-?%d+) %d+$')
      if k4 and string.sub(kv, -2) ~= ' 0' then redis.call('HSET', h, 'k', k4 .. ' 0') end
    end
    if ARGV[1] == '' then
      -- At the instant itself: a relative PEXPIRE counts from the time
      -- Redis cached for the command, which may lag TIME by milliseconds.
      redis.call('PEXPIREAT', h, now + ttl)
    else
      redis.call('PEXPIRE', h, ttl)
    end
  end
end
if not own or now - oldest < sp then return reply(1, ttl, 0, 0) end

-- From here the hash is live and its oldest stored bucket is dead.
local hlen = redis.call('HLEN', h)
-- Too few buckets can have died to pass the threshold: nothing to read.
if #ARGV <= 9 and bucket > 0 and hlen <= SCANMAX and math.floor((now - sp - oldest) / bucket) + 1 <= threshold then
  return reply(1, ttl, 0, 0)
end

-- countOf reads the units of a closed bucket from its value.
local function countOf(v)
  if v >= P then return (v - v % P) / P end
  if v < 0 then return -v end
  return v -- an earlier layout's plain count
end

-- del removes fields, 1,000 per HDEL.
local function del(fields)
  for i = 1, #fields, 1000 do
    redis.call('HDEL', h, unpack(fields, i, math.min(i + 999, #fields)))
  end
end

-- store writes the totals after dead buckets were removed, as the
-- provider's expiry writes them: "m" with the new u (and, sup, x) and o,
-- the newest bucket as stored. A suppressed single hash's RetryAfter
-- cursor, at the end of "k", counts from o: it is dropped with the move (a
-- set's limit keeps none).
local function store(u, x, o)
  if abs then
    local z = '' -- kept while its bucket may still be stored
    if zs and o <= zs + 0 then z = ' ' .. zs end
    if ts then z = ' ' .. ts end
    redis.call('HSET', h, 'm', fmt('%s %d %d %s %s', cs, u, o, ns, ncs) .. z)
  else
    redis.call('HSET', h, 'm', fmt('%d %d %d %s %s %s', u, x, o, ns, ncs, nds))
    if not set then -- a set's limit's "k" keeps its t and has no cursor
      local kv = redis.call('HGET', h, 'k')
      local k4 = kv and string.match(kv, '^(%d+ %d+ %d+ %-?%d+) ')
      if k4 then redis.call('HSET', h, 'k', k4) end
    end
  end
end

-- Batch mode: remove the dead buckets among the fields given. The oldest
-- start "o" is left as it is: when its field is gone, the provider's next
-- call finds the link broken and reads the hash whole, as it does for any
-- broken link; u and x stay the sums of what is stored.
if #ARGV > 9 then
  local gone, seen, n = {}, {}, 0
  for i = 10, #ARGV do
    local f = ARGV[i]
    local c = string.byte(f, 1)
    local st, isd = nil, false
    if c and (c >= 48 and c <= 57 or c == 45) then
      st = tonumber(f)
    elseif c == 100 and not abs then -- 'd<start>': a bucket's declined units
      st, isd = tonumber(string.sub(f, 2)), true
    end
    if st and now - st >= sp and not seen[f] then
      local v = redis.call('HGET', h, f)
      if v then
        seen[f] = true
        gone[#gone + 1] = f
        if isd then
          declined = declined - v
        else
          used = used - countOf(v + 0)
          n = n + 1
          if not abs then
            local df = 'd' .. f
            local dv = not seen[df] and redis.call('HGET', h, df)
            if dv then
              seen[df] = true
              gone[#gone + 1] = df
              declined = declined - dv
            end
          end
        end
      end
    end
  end
  if #gone > 0 and not dry then
    del(gone)
    store(used, declined, oldest)
  end
  return reply(1, ttl, n, 0)
end

-- Walk the links from the oldest bucket, one HGET (HMGET with its declined
-- count) each, as the providers' expiry does: up to 8 buckets on a hash
-- small enough to read whole, up to ARGV[7] on a larger one.
local limit = step
if hlen <= SCANMAX then limit = 8 end
local gone, n, linked = {}, 0, true
local u, x, o, of = used, declined, oldest, os
while now - o >= sp do
  if n >= limit then break end
  local off, dv
  if abs then
    off = redis.call('HGET', h, of)
  else
    local v = redis.call('HMGET', h, of, 'd' .. of)
    off, dv = v[1], v[2]
  end
  off = off and tonumber(off)
  local link = off and off % P
  if not off or off < P or link < 1 then linked = false break end
  u = u - (off - link) / P
  gone[#gone + 1] = of
  if dv then
    x = x - dv
    gone[#gone + 1] = 'd' .. of
  end
  n = n + 1
  o = o + link
  of = fmt('%d', o)
end
local reached = now - o < sp
-- The links must end at the newest bucket with its counts left.
if linked and reached and (o > newest or o == newest and (u ~= ncount or x ~= ndec)) then
  linked = false
end

if linked and (reached or hlen > SCANMAX) then
  if reached and n <= threshold and hlen <= SCANMAX then return reply(1, ttl, 0, 0) end
  if not dry then
    del(gone)
    store(u, x, o)
  end
  local more = 0
  if not reached and not dry then more = 1 end
  return reply(1, ttl, n, more)
end

if hlen > SCANMAX then return reply(1, ttl, 0, 2) end

-- Read the hash whole (at most SCANMAX fields) and keep its live buckets,
-- as the providers' scan does: u and x become the sums of the live buckets
-- (the newest, in the meta fields, included) and o the oldest live start.
local all = redis.call('HGETALL', h)
gone, n = {}, 0
u, x, o = ncount, ndec, newest
for i = 1, #all, 2 do
  local f = all[i]
  local c = string.byte(f, 1)
  if c >= 48 and c <= 57 or c == 45 then -- a digit or '-': a bucket
    local st = tonumber(f)
    if st then
      if now - st >= sp then
        gone[#gone + 1] = f
        n = n + 1
      else
        u = u + countOf(all[i + 1] + 0)
        if st < o then o = st end
      end
    end
  elseif c == 100 and not abs then -- 'd<start>'
    local st = tonumber(string.sub(f, 2))
    if st then
      if now - st >= sp then
        gone[#gone + 1] = f
      else
        x = x + all[i + 1]
      end
    end
  end
end
if n <= threshold then return reply(1, ttl, 0, 0) end
if not dry then
  del(gone)
  store(u, x, o)
end
return reply(1, ttl, n, 0)
