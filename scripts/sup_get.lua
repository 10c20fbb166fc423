-- sup_get.lua: the usage of a suppressed key. Read-only.
--
-- KEYS[1]  <prefix>:{<key>}:sup:h, the key's hash (sup_inc.lua)
-- ARGV[1]  now in ms; an empty string reads Redis TIME
-- ARGV[2]  W, the window in ms
-- ARGV[3]  B, the bucket in ms
--
-- Reply: {accepted, declined, soft capacity} over the live buckets;
--        {0, 0, 0} for a key with no live bucket.
local h = KEYS[1]
-- include now.lua
-- include sup_usage.lua

-- "k" may end in the RetryAfter cursor
local a, d, c = usage(h, now, ARGV[2], ARGV[3], '^(%d+) %d+ %d+ %-?%d+[ %d]*$')
if not a then return redis.error_reply(d) end
return {a, d, c}
