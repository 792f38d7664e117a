-- Put leased requests back in their hosts' queues, at their old place. Used
-- for a worker handing back what it will not process, and for expired leases
-- of dead workers. Safe when several workers run it at once: a lease is moved
-- only by the call that removes it.
--
-- KEYS[1]    leases: sorted set of leased JSON requests, score = deadline (ms)
-- KEYS[2]    lease info: hash leased request -> "<queue score> <host>"
-- KEYS[3]    hosts: ready-set, host -> time (ms) it may next be fetched
-- KEYS[4]    size: counter of queued requests
-- KEYS[4+i]  queue of the host of the i-th request
-- ARGV[i]    the i-th leased request
-- Returns    the number of requests put back.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local moved = 0
for i = 1, #ARGV do
  local m = ARGV[i]
  if redis.call('ZREM', KEYS[1], m) == 1 then
    local info = redis.call('HGET', KEYS[2], m) or '0 '
    redis.call('HDEL', KEYS[2], m)
    local score, host = string.match(info, '^(%S+) (.*)$')
    redis.call('ZADD', KEYS[4 + i], tonumber(score) or 0, m)
    if host and host ~= '' then redis.call('ZADD', KEYS[3], 'NX', now, host) end
    moved = moved + 1
  end
end
if moved > 0 then redis.call('INCRBY', KEYS[4], moved) end
return moved
