-- sup_set_get.lua: the usage of a suppressed key in each limit of a set,
-- read-only, as sup_get.lua reads one hash.
--
-- KEYS[i]  <prefix>:{<key>}:sup:h:<name>, the hash of limit i (sup_set.lua),
--          1 <= i <= 8
-- ARGV[1]  now in ms; an empty string reads Redis TIME
-- ARGV[2i], ARGV[2i + 1]  W and B of limit i, in ms
--
-- Reply: {accepted, declined, soft capacity} per limit, flat, over the
--        live buckets; 0, 0, 0 for a hash with no live bucket.
local nk = #KEYS
if nk < 1 or nk > 8 or #ARGV ~= 1 + 2 * nk then
  return redis.error_reply('ERR sup_set_get.lua: ' .. nk .. ' keys and ' .. #ARGV .. ' arguments')
end
-- include now.lua
-- include sup_usage.lua

-- "k" = "<c> <hc> <f> <ft> <t>"
local reply = {}
for i = 1, nk do
  local a, d, c = usage(KEYS[i], now, ARGV[2 * i], ARGV[2 * i + 1], '^(%d+) %d+ %d+ %-?%d+ %d+$')
  if not a then return redis.error_reply(d) end
  reply[3 * i - 2], reply[3 * i - 1], reply[3 * i] = a, d, c
end
return reply
