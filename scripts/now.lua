-- now.lua: now in ms, ARGV[1], or Redis TIME when ARGV[1] is empty.
-- Included by: abs_inc.lua, abs_set.lua, abs_get.lua, sup_inc.lua, sup_set.lua, sup_allowed.lua, sup_get.lua, sup_set_get.lua
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  local usec = t[2] + 0 -- whole ms without a call of math.floor
  now = t[1] * 1000 + (usec - usec % 1000) / 1000
else
  now = ARGV[1] + 0
end
