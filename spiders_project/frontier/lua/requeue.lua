#!lua flags=allow-oom
-- Put leased requests back in their hosts' queues, at their old place:
-- - "mine": a worker handing back its own leases (by id) that it will not
--   process;
-- - "expired": leases of a dead or stalled worker, each moved only if its
--   deadline has passed now, in this same atomic step (a lease renewed since
--   expired.lua listed it stays with its holder).
-- Safe when several workers run it at once: a lease is moved only by the call
-- that removes it. Allowed under OOM: each move frees as much as it adds.
--
-- KEYS[1]    leases: sorted set of lease ids, score = deadline (ms)
-- KEYS[2]    lease info: hash lease id -> "<queue score> <#host> <host><request>"
-- KEYS[3]    hosts: ready-set, host -> time (ms) it may next be fetched
-- KEYS[4]    size: counter of queued requests
-- KEYS[5]    in flight: hash host -> its requests leased and not yet downloaded
--            (each move gives one back, unless its download ended: ack.lua)
-- KEYS[6]    cap waiters: hash host -> workers that found it at its cap
-- KEYS[7]    released: set of lease ids whose slot ack.lua gave back already
-- KEYS[7+i]  queue of the host of the i-th lease (L leases)
-- KEYS[7+L+i] list of that host: a request taken from it (score "L") goes
--            back at its head, the next to be leased
-- KEYS[7+2L+i] jobs set of that host: a request of a job other than the
--            default one goes back there, at its place (job_queues.lua)
-- KEYS[8+3L] job counts: hash "<job>|<count>" (job_counts.lua): each lease
--            removed leaves leased (and slots, if it held one), each request
--            put back counts as queued
-- KEYS[9+3L] job turns: hash host -> the job its last lease served (job_queues.lua)
-- ARGV[1]    now, in ms since the epoch, or "" for Redis' own clock (TIME): production
--            always passes "" (one clock for every node); tests pass a time to step it
-- ARGV[2]    "mine" or "expired"
-- ARGV[2+i]  the i-th lease id
-- Returns    the number of requests put back in a queue. A request already
--            queued (the same payload queued twice) is not counted twice.
--!include redis_access/lua/clock.lua
--!include job_queues.lua
local now = now_ms(ARGV[1])
local expired_only = ARGV[2] == 'expired'
local leases = #ARGV - 2
local moved = 0
for i = 3, #ARGV do
  local id = ARGV[i]
  local deadline = redis.call('ZSCORE', KEYS[1], id)
  if deadline and (not expired_only or tonumber(deadline) <= now) then
    local info = redis.call('HGET', KEYS[2], id) or ''
    local score, host, request
    if string.sub(id, 1, 1) == '{' then
      -- A lease of the previous release: the member is the request.
      score, host = string.match(info, '^(%S+) (.*)$')
      request = id
    else
      local len, start
      score, len, start = string.match(info, '^(%S+) (%d+) ()')
      if len then
        host = string.sub(info, start, start + tonumber(len) - 1)
        request = string.sub(info, start + tonumber(len))
      end
    end
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
    local released = redis.call('SREM', KEYS[7], id) == 1
    if host and host ~= '' and string.sub(id, 1, 1) ~= '{' and not released then
      if redis.call('HINCRBY', KEYS[5], host, -1) <= 0 then redis.call('HDEL', KEYS[5], host) end
      redis.call('HDEL', KEYS[6], host)
      job_count(info, 'slots', -1)
    end
    if request and request ~= '' then
      local back = 1
      if score == 'L' then
        redis.call('LPUSH', KEYS[5 + leases + i], request)
      else
        back = queue_job_request(KEYS[5 + i], KEYS[5 + 2 * leases + i], KEYS[9 + 3 * leases],
          host or '', job_of(request), tonumber(score) or 0, request)
        if type(back) == 'table' then error(back) end  -- a queue of the wrong type
      end
      moved = moved + back
      job_count(request, 'leased', -1)
      if back == 1 then job_count(request, 'queued', 1) end
      if host and host ~= '' then redis.call('ZADD', KEYS[3], 'NX', now, host) end
    end
  end
end
if moved > 0 then redis.call('INCRBY', KEYS[4], moved) end
job_counts_done(KEYS[8 + 3 * leases])
return moved
