#!lua flags=no-writes
-- The proxies banned now, with the ms left of each ban.
--
-- KEYS[1]  banned proxies: sorted set of proxy name -> time (ms) its ban ends
-- ARGV[1]  now, in ms since the epoch, or "" for Redis' own clock (TIME)
-- Returns  {name, ms left, name, ms left, ...}
--!include redis_access/lua/clock.lua
local now = now_ms(ARGV[1])
local found = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
local out = {}
for i = 1, #found, 2 do
  out[#out + 1] = found[i]
  out[#out + 1] = tonumber(found[i + 1]) - now
end
return out
