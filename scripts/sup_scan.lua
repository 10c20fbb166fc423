-- sup_scan.lua: scanBuckets, written once for the scripts that include it.
-- Included by: sup_inc.lua, sup_set.lua, sup_allowed.lua
-- scanBuckets reads the whole hash h in one HGETALL and returns the fields
-- of its dead buckets, the sums of the live buckets' offered and declined
-- units, and the live buckets oldest first: k, then starts, offered and
-- declined in parallel arrays, the newest (from "m") last. A listpack hash
-- returns its fields in the order written, each "d<start>" after its
-- bucket: only a hash Redis converted to a hash table needs the sort and
-- the lookups by start. Everything is an argument: it captures no local
-- of the script.
local function scanBuckets(h, now, sp, newest, ncount, ndec)
  local P, byte = 4294967296, string.byte
  local nf = redis.call('HLEN', h)
  if nf > 4096 then error({err = 'SLUICEFIELDS ' .. h .. ' ' .. nf}) end -- another client's hash
  local all = redis.call('HGETALL', h)
  local dead, su, sd = {}, ncount, ndec
  local sorted, prev, lost = true, -1 / 0, nil
  local k, bs, bo, bd = 0, {}, {}, {}
  for i = 1, #all, 2 do
    local f = all[i]
    local c = byte(f, 1)
    if c >= 48 and c <= 57 or c == 45 then -- a digit or '-': a bucket
      local st = f + 0
      if now - st >= sp then
        dead[#dead + 1] = f
      else
        local v = all[i + 1] + 0
        if v >= P then v = (v - v % P) / P elseif v < 0 then v = -v end -- else a plain count
        k = k + 1
        bs[k], bo[k], bd[k] = st, v, 0
        su = su + v
        if st < prev then sorted = false end
        prev = st
      end
    elseif c == 100 then -- 'd': a bucket's declined units
      local st = string.sub(f, 2) + 0
      if now - st >= sp then
        dead[#dead + 1] = f
      else
        local v = all[i + 1] + 0
        if k > 0 and bs[k] == st then
          bd[k] = v
        else
          lost = lost or {}
          lost[st] = v
        end
      end
    end
  end
  if not sorted or lost then
    local off, dec = {}, lost or {}
    for i = 1, k do
      off[bs[i]] = bo[i]
      if bd[i] ~= 0 then dec[bs[i]] = bd[i] end
    end
    if not sorted then table.sort(bs) end
    for i = 1, k do bo[i], bd[i] = off[bs[i]], dec[bs[i]] or 0 end
  end
  for i = 1, k do sd = sd + bd[i] end
  k = k + 1
  bs[k], bo[k], bd[k] = newest, ncount, ndec
  return dead, su, sd, k, bs, bo, bd
end
