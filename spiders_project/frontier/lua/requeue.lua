-- Return leased requests to the queue: the given ones (a worker handing back
-- what it will not process) or, with no requests given, every lease whose
-- deadline has passed (a worker that died). Safe when several workers run it
-- at once: each lease is moved exactly once.
--
-- KEYS[1]  queue: sorted set of JSON requests
-- KEYS[2]  leases: sorted set of leased JSON requests, score = deadline (ms)
-- KEYS[3]  lease scores: hash leased request -> its queue score
-- ARGV[1]  the most expired leases to move (ignored when requests are given)
-- ARGV[2..] the leased requests to return
-- Returns  the number of requests put back.
local members = {}
if #ARGV > 1 then
  for i = 2, #ARGV do members[#members + 1] = ARGV[i] end
else
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  members = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
end
local moved = 0
for _, m in ipairs(members) do
  if redis.call('ZREM', KEYS[2], m) == 1 then
    local score = redis.call('HGET', KEYS[3], m)
    redis.call('HDEL', KEYS[3], m)
    redis.call('ZADD', KEYS[1], score or 0, m)
    moved = moved + 1
  end
end
return moved
