-- sup_scan.lua: the function sup_inc.lua, sup_set.lua and sup_allowed.lua
-- share, written once. A script's line "-- include sup_scan.lua" stands
-- for this text (scripts.go sends the script with the text in its place),
-- so it defines one local function and reads no KEYS or ARGV.
--
-- Included by: sup_inc.lua, sup_set.lua, sup_allowed.lua

-- scanBuckets reads the whole hash h in one HGETALL (at most 2 (W/B + 1)
-- bucket fields: docs/algorithms.md, Bounded work) and returns the fields
-- of its dead buckets, the sums of the live buckets' offered and declined
-- units, and the live buckets oldest first in parallel arrays: k, then
-- starts, offered and declined. The newest bucket, kept in the meta fields
-- (start newest, counts ncount and ndec), is the last. A closed bucket's
-- value is offered * 2^32 + link or -offered (a plain count is an earlier
-- layout's); "d<start>" holds its declined units. A compact (listpack)
-- hash returns its fields in the order they were written: ascending
-- starts, each "d<start>" right after its bucket. Only a hash Redis has
-- converted to a hash table needs the sort and the lookups by start.
-- Numbers are parsed once and no table is made per bucket. It captures
-- none of a script's locals: everything is an argument.
local function scanBuckets(h, now, sp, newest, ncount, ndec)
  local P, byte = 4294967296, string.byte
  -- more fields than any record holds (another client's): an error
  -- naming the hash, not a read that holds Redis for every key
  local nf = redis.call('HLEN', h)
  if nf > 4096 then error({err = 'SLUICEFIELDS ' .. h .. ' ' .. nf}) end
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
        if v >= P then
          v = (v - v % P) / P
        elseif v < 0 then
          v = -v
        end -- else an earlier layout's plain count
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
