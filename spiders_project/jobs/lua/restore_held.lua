#!lua flags=allow-oom
-- Put the requests of a resumed job back in their hosts' queues, from the
-- set the lease script kept them in while the job was paused (lease.lua).
-- Each member moves only if this call removes it from the held set, so two
-- resumes at once (or a resume run again) never queue one twice. Allowed
-- under OOM: each move frees what it adds.
--
-- KEYS[1]     held: sorted set of "<job> <queue score> <#host> <host><request>"
-- KEYS[2]     hosts: ready-set of the same lane, host -> time (ms) it may be fetched
-- KEYS[3]     size: counter of the lane's queued requests
-- KEYS[4]     job counts of the shard (job_counts.lua)
-- KEYS[4+i]   queue (sorted set) of the host of the i-th member (E members)
-- KEYS[4+E+i] list of that host: a request taken from it (score "L") goes
--             back at its tail
-- KEYS[4+2E+i] jobs set of that host: a request of a job other than the
--             default one goes back there, at its place (frontier/lua/job_queues.lua)
-- KEYS[5+3E]  job turns of the lane: hash host -> the job its last lease served
-- ARGV[1]     now, in ms since the epoch, or "" for Redis' own clock (TIME)
-- ARGV[1+i]   the i-th member, as read from the held set
-- Returns     the number of requests put back in a queue. A request held still
--             counts as queued for its job; one already queued again (the same
--             payload) is not queued twice and leaves the count.
--!include redis_access/lua/clock.lua
--!include frontier/lua/job_queues.lua
local now = now_ms(ARGV[1])
local members = #ARGV - 1
local restored = 0
for i = 1, members do
  local member = ARGV[1 + i]
  if redis.call('ZREM', KEYS[1], member) == 1 then
    local score, len, start = string.match(member, '^%S+ (%S+) (%d+) ()')
    if len then
      local host = string.sub(member, start, start + tonumber(len) - 1)
      local request = string.sub(member, start + tonumber(len))
      local back = 1
      if score == 'L' then
        redis.call('RPUSH', KEYS[4 + members + i], request)
      else
        back = queue_job_request(KEYS[4 + i], KEYS[4 + 2 * members + i], KEYS[5 + 3 * members],
          host, job_of(request), tonumber(score) or 0, request)
        if type(back) == 'table' then error(back) end  -- a queue of the wrong type
      end
      if back == 0 then job_count(request, 'queued', -1) end
      restored = restored + back
      redis.call('ZADD', KEYS[2], 'NX', now, host)
    end
  end
end
if restored > 0 then redis.call('INCRBY', KEYS[3], restored) end
job_counts_done(KEYS[4])
return restored
