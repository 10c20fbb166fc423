-- abs_set.lua: one decision of the absolute strategy on a set of limits,
-- the Redis twin of internal/window's IncAbsoluteSet: admitted only if
-- every limit has room, then recorded in every limit. Each hash is handled
-- as abs_inc.lua handles its one, with a sixth value in "m", t, the span
-- its TTL counts from the newest bucket (docs/data-model.md).
--
-- KEYS[i]  the hash of limit i, <prefix>:{<escaped key>}:abs:h:<name>, for
--          i = 1..k (k <= 8)
-- ARGV[1]  now in ms, or an empty string to read Redis TIME
-- ARGV[2]  n, the cost; 0 is a peek for one unit that writes nothing; at
--          most the largest capacity + 1
-- ARGV[3 + 4(i-1) ..]  for limit i: W, B, C (a plain decimal, stored as
--          sent) and the PEXPIRE of its writes in ms (W + B)
-- ARGV[3 + 4k]  optional, the mode: 'writeback' is the failover's
--          write-back (internal/redisprov): n units a local fallback
--          admitted, recorded in every limit whatever it holds
--
-- Reply: one string of decimals, each followed by a space:
--   an admission with fewer than 2^21 units remaining in every limit: k
--     values, per limit remaining * 2^32 + reset_after_ms;
--   any other decision: 1 + 4k values, allowed (0/1), then per limit:
--     refused (0/1), remaining, retry_after_ms (0: never), reset_after_ms.
if redis.replicate_commands then redis.replicate_commands() end
-- include abs_scan.lua
local ARGV, redis, string = ARGV, redis, string -- after scanBuckets, which so captures none
-- include now.lua
local n = ARGV[2] + 0
local cost = n
if cost < 1 then cost = 1 end
local nk = #KEYS
-- Under the caller's clock t is never read, so the pattern leaves it uncaptured.
local clock = ARGV[1] ~= ''
local META = '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$'
if clock then META = '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) %d+$' end
local fmt = string.format
local P = 4294967296 -- 2^32: a closed bucket's value is count * P + link
local LINKS = 8

-- The limits' state: NV values per limit in one flat table (limit i's from
-- S[NV (i - 1) + 1]), presized for three limits and a refusal's reply.
-- STATE: 0 absent, 1 live, 2 stale (a write deletes the hash); OF, NS: the
-- oldest and newest starts as strings; MOVED: the capacity changed; TS:
-- the stored t; REC: the record to write, false when "v" holds it.
local NV = 13
local SP, BK, CAP, USED, OLDEST, NEWEST, NCOUNT, STATE, OF, NS, MOVED, TS, REC = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13
local S = {false, false, false, false, false, false, false, false, false, false, false, false,
  false, false, false, false, false, false, false, false, false, false, false, false,
  false, false, false, false, false, false, false, false, false, false, false, false,
  false, false, false, false, false, false, false, false, false, false, false, false, false,
  false, false, false}
-- made when needed: dead[i], the dead buckets' fields; scanned[i], a scan's
local dead, scanned = nil, nil

local allowed = true
for i = 1, nk do
  local a = 4 * i - 1 -- ARGV[a ..]: W, B, C, TTL
  local o = NV * (i - 1)
  local b, c = ARGV[a + 1] + 0, ARGV[a + 2] + 0
  local sp = ARGV[a] + b
  local h = KEYS[i]
  local mr = redis.call('HMGET', h, 'm', 'v')
  local mv, vs = mr[1], mr[2]
  local cs, us, os, ns, ncs, ts
  if mv then cs, us, os, ns, ncs, ts = string.match(mv, META) end
  local rec = 'a2 ' .. ARGV[a] .. ' ' .. ARGV[a + 1]
  if vs == rec then
    rec = false
  elseif vs then
    -- another record: as abs_inc.lua
    local rw, rb = string.match(vs, '^a2 (%d+) (%d+)$')
    if not rw then return redis.error_reply('SLUICELAYOUT ' .. vs) end
    if ns and now - ns < rw + rb then
      return redis.error_reply('SLUICEWINDOW ' .. vs .. ' ' .. rec)
    end
    ns = nil
  end
  local state, used, oldest, newest, ncount = 0, 0, 0, 0, 0
  if ns then
    newest = ns + 0
    if now - newest >= sp or newest - now >= sp then -- dead, or from W + B ahead (abs_inc.lua)
      state = 2
    else
      state, used, oldest, ncount = 1, us + 0, os + 0, ncs + 0
    end
  elseif mv then
    state = 2
  end
  S[o + SP], S[o + BK], S[o + CAP], S[o + STATE], S[o + OF], S[o + NS], S[o + MOVED], S[o + TS], S[o + REC] = sp, b, c,
    state, os, ns, cs ~= ARGV[a + 2], ts, rec
  if state == 1 and now - oldest >= sp then
    local gone, ofield, fresh = {}, os, true
    while now - oldest >= sp do
      if #gone >= LINKS then fresh = false break end
      local v = redis.call('HGET', h, ofield)
      if v then v = v + 0 end
      local link = v and v % P
      if not v or v < P or link < 1 then fresh = false break end
      used = used - (v - link) / P
      gone[#gone + 1] = ofield
      oldest = oldest + link
      ofield = fmt('%d', oldest)
    end
    if fresh and (oldest > newest or oldest == newest and used ~= ncount) then fresh = false end
    S[o + OF] = ofield
    dead = dead or {}
    dead[i] = gone
    if not fresh then
      local sc
      sc, used, dead[i], oldest = scanBuckets(h, now, sp, newest, ncount)
      scanned = scanned or {}
      scanned[i] = sc
      S[o + OF] = fmt('%d', oldest)
    end
  end
  S[o + USED], S[o + OLDEST], S[o + NEWEST], S[o + NCOUNT] = used, oldest, newest, ncount
  if cost > c or used + cost > c then allowed = false end
end
if not allowed and ARGV[3 + 4 * nk] == 'writeback' then allowed = true end

-- Record the call in every limit (a refusal stores only expiry and
-- capacity), as abs_inc.lua's writes do, each TTL by the rule of
-- docs/data-model.md, A set's hashes.
if n > 0 then
  for i = 1, nk do
    local o = NV * (i - 1)
    local state, gone = S[o + STATE], dead and dead[i]
    -- a refusal writes only a limit to delete, clean or give its capacity
    if allowed or state == 2 or state == 1 and (gone or S[o + MOVED]) then
      local a = 4 * i - 1
      local h = KEYS[i]
      local wrote = false
      -- keep: the t to store; tl, tj: the PEXPIRE of an open, of a join
      local keep, tl, tj = ARGV[a + 3], ARGV[a + 3], false
      if clock then
        keep, tj = '0', tl
      elseif state == 1 and S[o + TS] ~= keep then
        local sv, tv = S[o + TS] + 0, keep + 0
        if sv > tv then
          keep, tl = S[o + TS], S[o + TS]
        else
          tj = fmt('%d', tv - (now - S[o + NEWEST]))
        end
      end
      if state == 2 then
        redis.call('DEL', h)
        wrote = true
      elseif gone and #gone > 0 then
        for j = 1, #gone, 1000 do
          redis.call('HDEL', h, unpack(gone, j, math.min(j + 999, #gone)))
        end
        wrote = true
      end
      if allowed then
        local used, newest = S[o + USED] + n, S[o + NEWEST]
        S[o + USED] = used
        if state ~= 1 then
          local s0 = fmt('%d', now)
          redis.call('HSET', h, 'm', ARGV[a + 2] .. ' ' .. ARGV[2] .. ' ' .. s0 .. ' ' .. s0 .. ' ' .. ARGV[2] .. ' ' .. keep,
            'v', 'a2 ' .. ARGV[a] .. ' ' .. ARGV[a + 1])
          S[o + NEWEST], S[o + STATE], S[o + REC], tj = now, 1, false, tl
        elseif now - newest < S[o + BK] then
          -- a join: the stored strings concatenated (fmt's %s costs a sprintf,
          -- a number's concatenation a %.14g)
          redis.call('HSET', h, 'm', ARGV[a + 2] .. fmt(' %d ', used) .. S[o + OF] .. ' ' .. S[o + NS] .. fmt(' %d ', S[o + NCOUNT] + n) .. keep)
        else
          local ncount = S[o + NCOUNT]
          local closed = -ncount
          if ncount < 2097152 and now - newest < P then closed = ncount * P + (now - newest) end
          redis.call('HSET', h, S[o + NS], fmt('%d', closed), 'm', ARGV[a + 2] .. fmt(' %d ', used) .. S[o + OF] .. fmt(' %d ', now) .. ARGV[2] .. ' ' .. keep)
          S[o + NEWEST], tj = now, tl
        end
        wrote = true
      elseif state == 1 and (gone or S[o + MOVED]) then
        redis.call('HSET', h, 'm', ARGV[a + 2] .. fmt(' %d ', S[o + USED]) .. S[o + OF] .. ' ' .. S[o + NS] .. fmt(' %d ', S[o + NCOUNT]) .. keep)
        wrote = true
      end
      if wrote and S[o + STATE] == 1 then
        -- a live hash written before the record gets it with its first write
        if S[o + REC] then redis.call('HSET', h, 'v', S[o + REC]) end
        if tj then redis.call('PEXPIRE', h, tj) end
      end
    end
  end
end

-- The reply goes to S after the limits' state, for unpack to format.
local r = NV * nk
if allowed then
  for i = 1, nk do
    local o = NV * (i - 1)
    local remaining, reset = S[o + CAP] - S[o + USED], 0
    if S[o + STATE] == 1 then reset = S[o + NEWEST] + S[o + SP] - now end
    if remaining >= 2097152 or reset >= P then
      r = nil
      break
    end
    S[r + i] = remaining * P + reset
  end
  if r then return fmt(string.rep('%d ', nk), unpack(S, r + 1, r + nk)) end
  r = NV * nk
end

S[r + 1] = allowed and 1 or 0
for i = 1, nk do
  local o = NV * (i - 1)
  local c, used, sp = S[o + CAP], S[o + USED], S[o + SP]
  local refused, rt = 0, 0
  if cost > c or used + cost > c then
    refused = 1
    if cost <= c then
      local oldest, newest = S[o + OLDEST], S[o + NEWEST]
      local sc = scanned and scanned[i]
      if not sc then
        local first = S[o + NCOUNT]
        if oldest ~= newest then
          local h = KEYS[i]
          local v = redis.call('HGET', h, S[o + OF])
          v = v and v + 0 or 0
          if v >= P then first = (v - v % P) / P elseif v < 0 then first = -v else first = v end
        end
        if first > 0 and (used - first + cost <= c or first >= used) then
          rt = oldest + sp - now
        else
          local h = KEYS[i]
          sc, used = scanBuckets(h, now, sp, newest, S[o + NCOUNT]) -- the dead buckets a peek leaves are skipped
          S[o + USED] = used
        end
      end
      if sc then
        local starts, counts, freed = sc[1], sc[2], 0
        for j = 1, sc[3] do
          local cnt = counts[j]
          if cnt ~= 0 then
            freed = freed + cnt
            if used - freed + cost <= c or freed >= used then
              rt = starts[j] + sp - now
              break
            end
          end
        end
      end
    end
  end
  local remaining = c - used
  if remaining < 0 then remaining = 0 end
  local reset = 0
  if S[o + STATE] == 1 then reset = S[o + NEWEST] + sp - now end
  local j = r + 4 * i - 2
  S[j], S[j + 1], S[j + 2], S[j + 3] = refused, remaining, rt, reset
end
return fmt(string.rep('%d ', 1 + 4 * nk), unpack(S, r + 1, r + 1 + 4 * nk))
