-- The queued requests of crawl jobs on one host, kept apart from the default
-- job's so that the jobs on a host take turns (lease.lua): included by the
-- scripts that queue requests (enqueue, lease for due retries, requeue,
-- jobs/lua/restore_held). Touches only the keys it is given.
--
-- A request of the default job (no "crawl_job", or "default") goes where it
-- always went: the host's sorted set, or its list (enqueue.lua). A request of
-- any other job goes to the host's jobs set: one sorted set a host, every
-- member scored 0 and so ordered by its bytes, "<job> <order> <request>",
-- order the request's queue score (-priority * 2^40 + seq, enqueue.lua) plus
-- 2^52, in 16 digits. A job's members are then one range of the set
-- (ZRANGEBYLEX "[<job> " "(<job>!": ids are [A-Za-z0-9._-], all above '!'),
-- in the order of its queue: higher priority first, then first in, first
-- out. Its first member is one O(log N) read, whatever the set holds: the
-- cost of a turn does not grow with the queue.
--
-- Members are unique by their order (seq), so a payload queued twice (a seed
-- pushed twice) is queued twice here, where the host's sorted set would keep
-- it once: jobs' requests that are not links are their seeds, each pushed once.
--
-- The turns hash (one a queue: lane) holds host -> the job served last on
-- that host ("" for the default job); every script that adds to a host's jobs
-- set sets the host's field if it has none, so the lease script knows from
-- the hash alone which hosts have jobs to take turns between, and a crawl
-- without jobs pays one HLEN a lease call.
--!include job_counts.lua

-- 2^52: a queue score plus this is above 0 and below 2^53 (exact in a double).
local JOB_ORDER_BASE = 4503599627370496

local function job_member(job, score, request)
  return job .. ' ' .. string.format('%016.0f', score + JOB_ORDER_BASE) .. ' ' .. request
end

-- The job, queue score (a string, as lease infos and held members keep it)
-- and request of a member of a jobs set.
local function job_member_parts(member)
  local space = string.find(member, ' ', 1, true)
  local order = tonumber(string.sub(member, space + 1, space + 16)) or JOB_ORDER_BASE
  return string.sub(member, 1, space - 1), string.format('%.0f', order - JOB_ORDER_BASE),
    string.sub(member, space + 18)
end

-- Put `host` in the turns hash (as if the default job was served last) if it
-- is not there yet: its jobs set has requests now.
local function job_turn_of(turns, host)
  if not redis.call('HGET', turns, host) then redis.call('HSET', turns, host, '') end
end

-- Queue `request` of `job` at `score` in its host's queues: the default job's
-- sorted set `queue`, another job's jobs set `jobs` (and its host's turn in
-- `turns`). Returns what ZADD NX returns (1 added, 0 already there), or the
-- error of a key of the wrong type.
local function queue_job_request(queue, jobs, turns, host, job, score, request)
  if job == 'default' then return redis.pcall('ZADD', queue, 'NX', score, request) end
  job_turn_of(turns, host)
  return redis.pcall('ZADD', jobs, 'NX', 0, job_member(job, score, request))
end
