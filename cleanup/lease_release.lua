-- lease_release.lua: release a lease lock, only for its owner (package
-- cleanup; see lease_renew.lua).
--
-- KEYS[1]  the lock key, <prefix>:cleanup:lock
-- ARGV[1]  the owner's token
--
-- Reply: 1 when KEYS[1] held ARGV[1] and was deleted; 0 when it holds
--        another token or nothing (nothing is deleted).
local h = KEYS[1]
if redis.call('GET', h) == ARGV[1] then
  return redis.call('DEL', h)
end
return 0
