-- time1.lua: Redis TIME read and turned into ms as the scripts do, and
-- nothing else: with return1.lua, the fixed part of a call that reads
-- the clock. instr.sh counts it.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
return 1
