-- abs_string.lua: a prototype, not used by sluice: abs_inc.lua's decision
-- for ARGV[1] to ARGV[6] (no lease, no write-back) on a layout of one
-- string value, read by one GET and written by one PSETEX: what the cheapest
-- script for the same semantics costs (floor/instr.sh, "10k path";
-- floor_string_test.go checks it decides as abs_inc.lua does).
--
-- KEYS[1]  the key's string
-- ARGV     abs_inc.lua's ARGV[1] to ARGV[6]
-- Reply    abs_inc.lua's forms without a lease (internal/redisprov.Decision
--          reads them)
--
-- The value: little-endian doubles (struct), no decimal to parse or format:
--   W, B, C, used, newest start, newest count (the header, 48 bytes),
--   then one pair (start, count) per closed bucket, oldest first.
-- Every write copies the whole value, and Redis' Lua hashes every byte of
-- every string it makes (the value read, the part kept, the value
-- written): about 34 instructions a byte, 550 a bucket, so a call costs
-- O(W/B), joins too (instr.sh: 53,236 at 6 buckets, 105,188 at 101).
-- The differences from abs_inc.lua: no redis.replicate_commands (a no-op
-- since Redis 5), no checks of another client's numbers (SLUICESTATE).
-- == 1. Arguments =======================================================
local ARGV, redis = ARGV, redis
local pack, unpack = struct.pack, struct.unpack
local h = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  local usec = t[2] + 0
  now = t[1] * 1000 + (usec - usec % 1000) / 1000
else
  now = ARGV[1] + 0
end
local w, b, c = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local n = 1
if ARGV[5] ~= '1' then n = ARGV[5] + 0 end
local sp = w + b -- a bucket is live while now - start < W + B

-- == 2. Decode: the header and the oldest two closed buckets ===========
local v = redis.call('GET', h)
local live, stale = false, false
local used, ns, nc, sc = 0, 0, 0, 0
local len, pos = 0, 49 -- pos: the first closed bucket kept
if v then
  len = #v
  local sw, sb, s1, c1, s2, c2
  if len >= 80 then
    sw, sb, sc, used, ns, nc, s1, c1, s2, c2 = unpack('<dddddddddd', v)
  elseif len == 64 then
    sw, sb, sc, used, ns, nc, s1, c1 = unpack('<dddddddd', v)
  elseif len == 48 then
    sw, sb, sc, used, ns, nc = unpack('<dddddd', v)
  else
    return redis.error_reply('SLUICELAYOUT ' .. h)
  end
  if sw ~= w or sb ~= b then
    -- another window: an error while the key is live under its own
    if now - ns < sw + sb then
      return redis.error_reply(string.format('SLUICEWINDOW %d %d', sw, sb))
    end
    stale, used = true, 0
  elseif now - ns >= sp or ns - now >= sp then
    stale, used = true, 0 -- dead, or W + B or more ahead
  else
    live = true
    -- Expire: drop the closed buckets that died, oldest first.
    if s1 and now - s1 >= sp then
      used, pos = used - c1, 65
      if s2 and now - s2 >= sp then
        used, pos = used - c2, 81
        while pos < len do
          local s, k = unpack('<dd', v, pos)
          if now - s < sp then break end
          used, pos = used - k, pos + 16
        end
      end
    end
  end
end

if c == 0 then
  if not live then return {0, 0, 0} end
  c = sc
end
-- == 3. Decide and write ===============================================
local cost = n
if cost < 1 then cost = 1 end
local never = cost > c
local allowed = (not never) and used + cost <= c

if n > 0 then
  local nv, opened
  local kept = '' -- the closed buckets kept, as stored
  if live and pos <= len and (allowed or pos > 49 or sc ~= c) then kept = string.sub(v, pos) end
  if allowed then
    used = used + n
    if not live then
      nv = pack('<dddddd', w, b, c, n, now, n)
      ns, nc, live, opened = now, n, true, true
    elseif now - ns < b then
      nc = nc + n
      nv = pack('<dddddd', w, b, c, used, ns, nc) .. kept
    elseif #kept <= 128 then
      nv = pack('<ddddddc0dd', w, b, c, used, now, n, kept, ns, nc)
      ns, nc, opened = now, n, true
    else -- pack copies a string byte by byte, .. at once
      nv = pack('<dddddd', w, b, c, used, now, n) .. kept .. pack('<dd', ns, nc)
      ns, nc, opened = now, n, true
    end
  elseif live and (pos > 49 or sc ~= c) then
    -- the latest capacity wins, even on a refusal
    nv = pack('<dddddd', w, b, c, used, ns, nc) .. kept
  elseif stale then
    redis.call('DEL', h)
  end
  if nv then
    -- The key dies W + B after its newest bucket opened; a write under
    -- Redis TIME that opens none keeps the TTL of the one that did.
    -- (PSETEX: SET PX's effect, about 700 instructions fewer)
    if opened or ARGV[1] ~= '' and ns <= now then
      redis.call('PSETEX', h, ARGV[6], nv)
    elseif ARGV[1] ~= '' then
      redis.call('PSETEX', h, string.format('%d', ARGV[6] + ns - now), nv)
    else
      redis.call('SET', h, nv, 'KEEPTTL')
    end
  end
end
-- == 4. Reply ==========================================================
local reset = 0
if live then reset = ns + sp - now end
local remaining = c - used
if allowed then
  if ARGV[4] ~= '0' and remaining < 2097152 and reset < 4294967296 then
    return remaining * 4294967296 + reset
  end
  return {c, remaining, reset}
end
if remaining < 0 then remaining = 0 end
local retry = 0
if not never and live then
  -- walk the live buckets oldest first until enough units die
  local freed = 0
  retry = ns + sp - now
  while pos < len do
    local s, k = unpack('<dd', v, pos)
    freed = freed + k
    if used - freed + cost <= c then
      retry = s + sp - now
      break
    end
    pos = pos + 16
  end
end
if remaining == 0 and not never and ARGV[4] ~= '0' and retry < 67108864 and reset < 67108864 then
  return -(retry * 67108864 + reset) - 1
end
local nvr = 0
if never then nvr = 1 end
return {1, 0, c, remaining, retry, reset, 0, nvr}
