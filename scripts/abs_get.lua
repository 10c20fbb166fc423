-- abs_get.lua: a key's usage under the absolute strategy, read-only: the
-- units held by live buckets and the stored capacity, both 0 for a key
-- with no live bucket.
--
-- KEYS[i]  the hash of limit i: the key's single hash (abs_inc.lua), or a
--          set's limits' hashes (abs_set.lua)
-- ARGV[1]  now in ms, or an empty string to read Redis TIME
-- ARGV[2i], ARGV[2i + 1]  W and B of limit i, in ms
--
-- Reply: {used_1, limit_1, used_2, limit_2, ...}; a record "v" of another
-- window or layout is an error reply, as in abs_inc.lua.
-- include now.lua
local P = 4294967296

-- usage returns hash h's live units and stored capacity, or nil and an error.
local function usage(h, w, b)
  local sp = w + b
  local mr = redis.call('HMGET', h, 'm', 'v')
  local mv, vs = mr[1], mr[2]
  local cs, us, os, ns, ncs
  if mv then
    -- a sixth value, a single hash's z or a set's t, changes no count
    cs, us, os, ns, ncs = string.match(mv, '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) ?%-?%d*$')
  end
  local rec = 'a2 ' .. w .. ' ' .. b
  if vs and vs ~= rec then
    -- another record: as abs_inc.lua
    local rw, rb = string.match(vs, '^a2 (%d+) (%d+)$')
    if not rw then return nil, 'SLUICELAYOUT ' .. vs end
    if ns and now - ns < rw + rb and ns - now < rw + rb then return nil, 'SLUICEWINDOW ' .. vs .. ' ' .. rec end
    return 0, 0
  end
  if not ns or now - ns >= sp or ns - now >= sp then return 0, 0 end
  local used = us + 0
  -- 2^53 or more (inexact in a double): another client's count
  if used >= 9007199254740992 or ncs + 0 >= 9007199254740992 then
    return nil, 'SLUICESTATE ' .. h .. ' m ' .. mv
  end
  if now - os >= sp then
    local nf = redis.call('HLEN', h)
    if nf > 4096 then error({err = 'SLUICEFIELDS ' .. h .. ' ' .. nf}) end -- another client's hash
    local all = redis.call('HGETALL', h)
    used = ncs + 0
    for i = 1, #all, 2 do
      local st = tonumber(all[i])
      if st and now - st < sp then
        local v = all[i + 1] + 0
        if v >= P then v = (v - v % P) / P elseif v < 0 then v = -v end
        used = used + v
      end
    end
  end
  return used, cs + 0
end

local out = {}
for i = 1, #KEYS do
  local used, c = usage(KEYS[i], ARGV[2 * i], ARGV[2 * i + 1])
  if not used then return redis.error_reply(c) end
  out[2 * i - 1], out[2 * i] = used, c
end
return out
