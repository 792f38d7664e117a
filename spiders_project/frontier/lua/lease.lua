-- Pop up to N requests and lease them to the caller instead of deleting them.
--
-- KEYS[1]  queue: sorted set of JSON requests
-- KEYS[2]  leases: sorted set of leased JSON requests, score = deadline (ms)
-- KEYS[3]  lease scores: hash leased request -> its queue score, to requeue it
-- ARGV[1]  N, the most requests to lease
-- ARGV[2]  lease duration in milliseconds (deadline uses the Redis clock)
-- Returns  {queue length after the pop, request, request, ...}
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
local popped = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[1]))
local out = {0}
for i = 1, #popped, 2 do
  redis.call('ZADD', KEYS[2], deadline, popped[i])
  redis.call('HSET', KEYS[3], popped[i], popped[i + 1])
  out[#out + 1] = popped[i]
end
out[1] = redis.call('ZCARD', KEYS[1])
return out
