#!lua flags=allow-oom
-- Set or clear an operator's limits of one host, and purge its queue if asked
-- (scrapy frontier host: --delay, --cap, --purge, --block). All in the host's
-- shard, so one script touches one slot; allow-oom: it frees memory or sets
-- one small field.
--
-- KEYS[1]        host limits: hash host -> "<delay ms> <cap>" (lease.lua reads it)
-- KEYS[2+6(l-1)] for each lane l = 1, 2 (HTTP, render): its ready-set (host ->
--   +1..+5       time it may next be fetched), its size counter, then the
--                host's queue (sorted set), its retries waiting (later), its list
--                and its jobs set (frontier/lua/job_queues.lua)
-- KEYS[14]       job counts of the host's shard: each request purged leaves its
--                job's queued or later count for its purged one (job_counts.lua)
-- ARGV[1]        the host
-- ARGV[2]        its limits "<delay ms> <cap>" (-1 / 0: none), "" to clear them,
--                "-" to leave them as they are
-- ARGV[3]        "1" to purge: drop every queued request of the host and its
--                retries waiting for their backoff, and take it out of the ready-set
-- Returns        {requests purged from the queues, retries purged}
--
-- A request leased meanwhile is the leasing worker's (its lease acks or puts it
-- back as usual); a blocked host's comes back to no one: the workers' leased
-- step drops it (politeness/steps.py).
--
-- A purge reads the requests it drops, to count them per job: one pass over
-- the host's queues, paid only by the operator's purge or block.
--!include frontier/lua/job_counts.lua
local host = ARGV[1]
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], host)
elseif ARGV[2] ~= '-' then
  redis.call('HSET', KEYS[1], host, ARGV[2])
end
local queued, later = 0, 0
if ARGV[3] == '1' then
  for lane = 0, 1 do
    local k = 2 + 6 * lane
    local q = redis.call('ZCARD', KEYS[k + 2]) + redis.call('LLEN', KEYS[k + 4])
      + redis.call('ZCARD', KEYS[k + 5])
    local l = redis.call('ZCARD', KEYS[k + 3])
    if q + l > 0 then
      local function purged(requests, what)
        for _, request in ipairs(requests) do
          job_count(request, what, -1)
          job_count(request, 'purged', 1)
        end
      end
      purged(redis.call('ZRANGE', KEYS[k + 2], 0, -1), 'queued')
      purged(redis.call('LRANGE', KEYS[k + 4], 0, -1), 'queued')
      purged(redis.call('ZRANGE', KEYS[k + 5], 0, -1), 'queued')
      purged(redis.call('ZRANGE', KEYS[k + 3], 0, -1), 'later')
      redis.call('DEL', KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5])
      redis.call('DECRBY', KEYS[k + 1], q + l)
    end
    redis.call('ZREM', KEYS[k], host)
    queued, later = queued + q, later + l
  end
end
job_counts_done(KEYS[14])
return {queued, later}
