#!lua flags=allow-oom
-- Bring one frontier shard's counters back to what they count, once there is
-- nothing left for them to count (frontier/reconcile.py runs it while its
-- worker has nothing to do).
--
-- Every other script changes a counter in the same atomic step as the
-- structure it counts, and a replica applies each script's writes whole, in
-- order: a failover to a replica that lacked the old master's last writes
-- loses counts and structures together. They can part only when a write to
-- one is lost without the other's: a key an operator deleted or restored, a
-- lease whose info was removed, a script that failed half-way (Redis keeps
-- what it wrote before the error), a bug. Nothing else would ever bring them
-- back, and the idle rule (read_model/contract.py: requests:size and the
-- leases of every queue) and the jobs' finish rule (their queued, later,
-- leased and slots counts) would wait for work that does not exist, for
-- good: every worker of the cluster kept from closing when idle. So each
-- count is recomputed here from what it counts, in the one case where that
-- takes bounded reads: when what it counts is empty.
--
-- - A lane without leases has no download in flight, no slot given back and
--   no worker waiting for one: its in-flight counts, released set and cap
--   waiters are emptied. A host they named goes back in the ready-set (NX:
--   a host already there keeps its turn), since a host waiting for a slot
--   that nobody will give back would never be leased again; one with nothing
--   queued leaves it at the next lease call (lease.lua).
-- - A lane whose ready-set and cap waiters are empty has no queued request
--   anyone could lease (every script that queues a request puts its host in
--   the ready-set in the same step, and a host leaves it only with an empty
--   queue or for the cap waiters): its size counter is set to 0.
-- - A shard whose two lanes are both that empty, with no request of a paused
--   job held, has no request of any job queued, backing off or leased: every
--   job's queued, later, leased and slots counts are set to 0 (a few fields
--   a job, so the hash is read whole).
--
-- A lease whose info went missing is ended by expired.lua once it expires (it
-- names no request to put back); the slot it held comes back here, once its
-- lane has no leases. Allowed under OOM: it only lowers counts and puts
-- hosts back where they were.
--
-- KEYS[1+7(l-1)]  for each lane l = 1, 2 (HTTP, render): its ready-set (host ->
--   +1..+6        time it may next be fetched), its leases, its size counter,
--                 its in-flight counts (hash host -> leases holding a slot),
--                 its cap waiters, its released set and its held set (the
--                 requests of paused jobs set aside by lease.lua)
-- KEYS[15]        job counts of the shard (job_counts.lua)
-- ARGV[1]         now, in ms since the epoch, or "" for Redis' own clock (TIME): production
--                 always passes "" (one clock for every node); tests pass a time to step it
-- Returns         what it corrected, one entry each, for the caller's log line:
--                 "<counter> <value it had>" (set to 0), "<hash> <field>=<value>"
--                 (a count set to 0 or removed), "<cap waiters> <host>" (removed),
--                 "<ready-set> <host>" (put back), "<released> (no lease)" (emptied)
--!include redis_access/lua/clock.lua
local now = nil
local fixed = {}
local quiet = true  -- no lane has a host, a waiter, a lease or a held request

for lane = 0, 1 do
  local k = 1 + 7 * lane
  local hosts, leases, size, flight, waiters, released, held =
    KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6]
  local leased = redis.call('ZCARD', leases)
  if leased == 0 then
    local stale = {}
    local counts = redis.call('HGETALL', flight)
    for i = 1, #counts, 2 do
      stale[#stale + 1] = counts[i]
      fixed[#fixed + 1] = flight .. ' ' .. counts[i] .. '=' .. counts[i + 1]
    end
    for _, host in ipairs(redis.call('HKEYS', waiters)) do
      stale[#stale + 1] = host
      fixed[#fixed + 1] = waiters .. ' ' .. host
    end
    if #stale > 0 then
      now = now or now_ms(ARGV[1])
      for _, host in ipairs(stale) do
        if redis.call('ZADD', hosts, 'NX', now, host) == 1 then
          fixed[#fixed + 1] = hosts .. ' ' .. host
        end
      end
      redis.call('DEL', flight, waiters)
    end
    if redis.call('DEL', released) == 1 then fixed[#fixed + 1] = released .. ' (no lease)' end
  end
  local ready = redis.call('ZCARD', hosts) + redis.call('HLEN', waiters)
  if ready == 0 then
    local count = redis.call('GET', size)
    if count and tonumber(count) ~= 0 then
      redis.call('SET', size, 0)
      fixed[#fixed + 1] = size .. ' ' .. count
    end
  end
  if ready + leased + redis.call('ZCARD', held) > 0 then quiet = false end
end

if quiet then
  local counts = KEYS[15]
  local fields = redis.call('HGETALL', counts)
  for i = 1, #fields, 2 do
    local field, value = fields[i], fields[i + 1]
    local what = string.match(field, '|(%a+)$')
    if (what == 'queued' or what == 'later' or what == 'leased' or what == 'slots')
        and tonumber(value) ~= 0 then
      redis.call('HSET', counts, field, 0)
      fixed[#fixed + 1] = counts .. ' ' .. field .. '=' .. value
    end
  end
end
return fixed
