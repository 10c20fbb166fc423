-- abs_scan.lua: scanBuckets, written once for the scripts that include it.
-- Included by: abs_inc.lua, abs_set.lua
-- scanBuckets reads every stored bucket of hash h in one HGETALL and
-- returns the live ones oldest first as {starts, counts, k} (the newest,
-- from "m", last), their sum, the dead ones' fields and the oldest live
-- start. A listpack hash returns its fields in the order written,
-- ascending, so only a hash Redis converted to a hash table is sorted.
-- Everything is an argument: it captures no local of the script.
local function scanBuckets(h, now, sp, newest, ncount)
  local P = 4294967296
  local nf = redis.call('HLEN', h)
  if nf > 4096 then error({err = 'SLUICEFIELDS ' .. h .. ' ' .. nf}) end -- another client's hash
  local all = redis.call('HGETALL', h)
  local starts, counts, k = {}, {}, 0
  local used, gone, oldest = ncount, {}, newest
  local sorted, prev = true, -1 / 0
  for j = 1, #all, 2 do
    local f = all[j]
    local st = tonumber(f)
    if st then
      if now - st >= sp then
        gone[#gone + 1] = f
      else
        local v = all[j + 1] + 0
        if v >= P then v = (v - v % P) / P elseif v < 0 then v = -v end
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
    for j = 1, k do by[starts[j]] = counts[j] end
    table.sort(starts)
    for j = 1, k do counts[j] = by[starts[j]] end
  end
  if k > 0 then oldest = starts[1] end
  k = k + 1
  starts[k], counts[k] = newest, ncount
  return {starts, counts, k}, used, gone, oldest
end
