#!lua flags=allow-oom
-- Push the deadline of leases still being worked on (the worker is alive).
-- Allowed under OOM: it only rewrites scores, and a worker that could not
-- renew while Redis is full would see its leases expire and fetched twice.
--
-- KEYS[1]   leases: sorted set of lease ids, score = deadline (ms)
-- ARGV[1]   now, in ms since the epoch, or "" for Redis' own clock (TIME): production
--           always passes "" (one clock for every node); tests pass a time to step it
-- ARGV[2]   lease duration in milliseconds from now
-- ARGV[3..] the caller's own lease ids; ids no longer leased (put back after
--           they expired, so now another worker's under a new id) are left alone
-- Returns   the number of leases renewed.
--!include redis_access/lua/clock.lua
local now = now_ms(ARGV[1])
local deadline = now + tonumber(ARGV[2])
local renewed = 0
for i = 3, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', deadline, ARGV[i])
end
return renewed
