#!lua flags=allow-oom
-- End leases for good (processed, rejected or dead), and give back their
-- hosts' slots of the cluster-wide cap.
--
-- KEYS[1]  leases: sorted set of lease ids, score = deadline (ms)
-- KEYS[2]  lease info: hash lease id -> "<queue score> <#host> <host><request>"
-- KEYS[3]  in flight: hash host -> requests of it leased
-- KEYS[4]  capped: set of hosts taken out of the ready-set at their cap
-- KEYS[5]  hosts: ready-set, host -> time (ms) it may next be fetched
-- ARGV[1]  now, in ms since the epoch, or "" for Redis' own clock (TIME): production
--          always passes "" (one clock for every node); tests pass a time to step it
-- ARGV[2..] lease ids of the caller
-- Returns  the number of leases ended.
--
-- Lease ids are unique, so this ends only the caller's own leases: one that
-- expired and was put back (requeue.lua gave its slot back then) has a new
-- id, and a late ack of the old one finds nothing and gives nothing back.
-- A capped host whose lease ends is ready again at once. Allowed under OOM:
-- it frees more than it writes.
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local ended = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  if redis.call('ZREM', KEYS[1], id) == 1 then
    ended = ended + 1
    local info = redis.call('HGET', KEYS[2], id)
    redis.call('HDEL', KEYS[2], id)
    local host = nil
    if info and string.sub(id, 1, 1) ~= '{' then
      local len, start = string.match(info, '^%S+ (%d+) ()')
      if len then host = string.sub(info, start, start + tonumber(len) - 1) end
    end
    if host then
      if redis.call('HINCRBY', KEYS[3], host, -1) <= 0 then redis.call('HDEL', KEYS[3], host) end
      if redis.call('SREM', KEYS[4], host) == 1 then redis.call('ZADD', KEYS[5], 'NX', now, host) end
    end
  end
end
return ended
