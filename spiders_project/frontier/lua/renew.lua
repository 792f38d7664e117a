#!lua flags=allow-oom
-- Push the deadline of leases still being worked on (the worker is alive).
-- Allowed under OOM: it only rewrites scores, and a worker that could not
-- renew while Redis is full would see its leases expire and fetched twice.
--
-- KEYS[1]   leases: sorted set of lease ids, score = deadline (ms)
-- ARGV[1]   lease duration in milliseconds from now (Redis clock)
-- ARGV[2..] the caller's own lease ids; ids no longer leased (put back after
--           they expired, so now another worker's under a new id) are left alone
-- Returns   the number of leases renewed.
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
local renewed = 0
for i = 2, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', deadline, ARGV[i])
end
return renewed
