-- abs_scan.lua: the function abs_inc.lua and abs_set.lua share, written
-- once. A script's line "-- include abs_scan.lua" stands for this text
-- (scripts.go sends the script with the text in its place), so it defines
-- one local function and reads no KEYS or ARGV.
--
-- Included by: abs_inc.lua, abs_set.lua

-- scanBuckets reads every stored bucket of hash h in one HGETALL and
-- returns the live ones oldest first in parallel arrays ({starts, counts,
-- k}: k of them, the newest, from "m", last), their sum, the fields of the
-- dead ones and the oldest live start. A compact (listpack) hash returns
-- its fields in the order they were written, which is ascending start
-- order, so the sort runs only for a hash Redis has converted to a hash
-- table. A closed bucket's value is count * 2^32 + link, or -count (a
-- plain count has no link). It captures none of a script's locals:
-- everything is an argument.
local function scanBuckets(h, now, sp, newest, ncount)
  local P = 4294967296
  -- more fields than any record holds (another client's): an error
  -- naming the hash, not a read that holds Redis for every key
  local nf = redis.call('HLEN', h)
  if nf > 4096 then error({err = 'SLUICEFIELDS ' .. h .. ' ' .. nf}) end
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
    for j = 1, k do by[starts[j]] = counts[j] end
    table.sort(starts)
    for j = 1, k do counts[j] = by[starts[j]] end
  end
  if k > 0 then oldest = starts[1] end
  k = k + 1
  starts[k], counts[k] = newest, ncount
  return {starts, counts, k}, used, gone, oldest
end
