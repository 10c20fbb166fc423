-- lease_renew.lua: extend a lease lock, only for its owner (package cleanup).
-- The lock is a string key set with SET NX PX to a random owner token; the
-- owner extends it with this script and releases it with lease_release.lua,
-- so that a cleaner whose lease expired (a long pause) can neither extend
-- nor release the lease another cleaner has taken since.
--
-- KEYS[1]  the lock key, <prefix>:cleanup:lock
-- ARGV[1]  the owner's token
-- ARGV[2]  the lease in ms
--
-- Reply: 1 when KEYS[1] held ARGV[1] and now expires ARGV[2] ms from now;
--        0 when it holds another token or nothing (the lease is lost).
local h = KEYS[1]
if redis.call('GET', h) == ARGV[1] then
  return redis.call('PEXPIRE', h, ARGV[2])
end
return 0
