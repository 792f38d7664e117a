-- The scripts' clock, shared by every script that reads the time
-- (``--!include redis_access/lua/clock.lua``, see redis_access/lua.py).
--
-- now_ms(arg)  ``arg`` as a number (a time in ms since the epoch: tests pass
--              one to step the clock), or, for "" or nil, Redis' own clock
--              (TIME), one clock for every node: what production uses.
local function now_ms(arg)
  local now = tonumber(arg)
  if now then return now end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
