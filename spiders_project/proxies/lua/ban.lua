#!lua flags=allow-oom
-- Ban a proxy for the whole cluster until now + ban time (never shortening a ban).
--
-- KEYS[1]  banned proxies: sorted set of proxy name -> time (ms) its ban ends
-- ARGV[1]  now, in ms since the epoch, or "" for Redis' own clock (TIME): production
--          always passes "" (one clock for every node); tests pass a time to step it
-- ARGV[2]  the proxy's name (scheme://host:port, never its credentials)
-- ARGV[3]  ban time (ms)
-- Returns  1 if this call banned it or made its ban longer, else 0.
--!include redis_access/lua/clock.lua
local now = now_ms(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZADD', KEYS[1], 'GT', 'CH', now + tonumber(ARGV[3]), ARGV[2])
