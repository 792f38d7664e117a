-- Push the deadline of leases still being worked on (the worker is alive).
--
-- KEYS[1]   leases: sorted set of leased JSON requests, score = deadline (ms)
-- ARGV[1]   lease duration in milliseconds from now (Redis clock)
-- ARGV[2..] the leased requests; ones no longer leased are left alone
-- Returns   the number of leases renewed.
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
local renewed = 0
for i = 2, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', deadline, ARGV[i])
end
return renewed
