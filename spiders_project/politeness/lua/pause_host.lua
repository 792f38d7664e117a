#!lua flags=allow-oom
-- Push a host's next turn to at least now + pause (Retry-After).
--
-- KEYS[1]  hosts: ready-set, host -> time (ms) it may next be fetched
-- ARGV[1]  the host
-- ARGV[2]  pause in milliseconds from now (Redis clock)
-- Returns  1 if the host's time moved, else 0 (it was already later).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZADD', KEYS[1], 'GT', 'CH', now + tonumber(ARGV[2]), ARGV[1])
