-- sup_usage.lua: usage, written once for the scripts that include it.
-- Included by: sup_get.lua, sup_set_get.lua
-- usage returns the accepted and declined units and the soft capacity of
-- hash h (0, 0, 0 without a live bucket), or nil and an error. kpat reads
-- the soft capacity from "k".
local function usage(h, now, w, b, kpat)
  local P = 4294967296
  local sp = w + b
  local mk = redis.call('HMGET', h, 'm', 'k', 'v')
  local us, xs, os, ns, ncs, nds, cs
  if mk[1] then us, xs, os, ns, ncs, nds = string.match(mk[1], '^(%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+)$') end
  if mk[2] then cs = string.match(mk[2], kpat) end
  local rec = 's2 ' .. w .. ' ' .. b
  if mk[3] and mk[3] ~= rec then
    -- another record: as sup_inc.lua
    local rw, rb = string.match(mk[3], '^s2 (%d+) (%d+)$')
    if not rw then return nil, 'SLUICELAYOUT ' .. mk[3] end
    if ns and cs and now - ns < rw + rb and ns - now < rw + rb then return nil, 'SLUICEWINDOW ' .. mk[3] .. ' ' .. rec end
    return 0, 0, 0
  end
  if not ns or not cs or now - ns >= sp or ns - now >= sp then
    return 0, 0, 0
  end
  local used, declined = us + 0, xs + 0
  -- 2^53 or more (inexact in a double): another client's count; nc is
  -- parsed only when it has the 16 digits such a count takes
  if used >= 9007199254740992 or declined >= 9007199254740992 or #ncs > 15 and ncs + 0 >= 9007199254740992 then
    return nil, 'SLUICESTATE ' .. h .. ' m ' .. mk[1]
  end
  if now - os >= sp then
    -- dead buckets are still stored: sum the live ones, the newest included
    used, declined = ncs + 0, nds + 0
    local nf = redis.call('HLEN', h)
    if nf > 4096 then error({err = 'SLUICEFIELDS ' .. h .. ' ' .. nf}) end -- another client's hash
    local all = redis.call('HGETALL', h)
    for i = 1, #all, 2 do
      local f = all[i]
      local c = string.byte(f, 1)
      if c >= 48 and c <= 57 or c == 45 then
        if now - f < sp then
          local v = all[i + 1] + 0
          if v >= P then v = (v - v % P) / P elseif v < 0 then v = -v end
          used = used + v
        end
      elseif c == 100 and now - string.sub(f, 2) < sp then
        declined = declined + all[i + 1]
      end
    end
  end
  return used - declined, declined, cs + 0
end
