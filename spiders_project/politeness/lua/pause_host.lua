#!lua flags=allow-oom
-- Push a host's next turn to at least now + pause (Retry-After).
--
-- KEYS[1]  hosts: ready-set, host -> time (ms) it may next be fetched
-- ARGV[1]  now, in ms since the epoch, or "" for Redis' own clock (TIME): production
--          always passes "" (one clock for every node); tests pass a time to step it
-- ARGV[2]  the host
-- ARGV[3]  pause in milliseconds from now
-- Returns  1 if the host's time moved, else 0 (it was already later).
--!include redis_access/lua/clock.lua
local now = now_ms(ARGV[1])
return redis.call('ZADD', KEYS[1], 'GT', 'CH', now + tonumber(ARGV[3]), ARGV[2])
