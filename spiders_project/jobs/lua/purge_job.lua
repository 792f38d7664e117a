#!lua flags=allow-oom
-- Drop every queued and backing-off request of one crawl job from some hosts'
-- queues of one shard and lane (scrapy jobs cancel), and its requests held
-- while it was paused: the other jobs' requests stay where they are, in their
-- order. Each request dropped leaves its job's queued or later count for its
-- purged one. Allowed under OOM: it only frees.
--
-- KEYS[1]       size: counter of the lane's queued requests
-- KEYS[2]       job counts of the shard (job_counts.lua)
-- KEYS[3]       held: the lane's requests of paused jobs (lease.lua)
-- KEYS[3+i]     queue (sorted set) of the i-th host (H hosts)
-- KEYS[3+H+i]   its retries waiting for their time (later set)
-- KEYS[3+2H+i]  its list of new priority-0 requests
-- KEYS[3+3H+i]  its jobs set (frontier/lua/job_queues.lua): the job's part of it
--               is one range, dropped without reading the rest
-- ARGV[1]       the job id
-- ARGV[2]       "1" to purge the held set too (the first call of a cancel), else "0"
-- Returns       {requests dropped from queues and lists, retries dropped, held dropped}
--
-- Each host's sorted set, list and later set are read whole, once: the job's
-- requests are found with job_counts.lua's job_of (no JSON decode). A list
-- that holds some is written again without them, in one step. A job other
-- than the default one has its queued requests in the jobs sets, where
-- requests queued before those sets existed may remain in the others.
--!include frontier/lua/job_counts.lua
local job = ARGV[1]
local hosts = (#KEYS - 3) / 4
local queued, later, held = 0, 0, 0

local function ours(member)
  return job_of(member) == job
end

-- Remove members of `key` (a sorted set) that are the job's; count them as `what`.
local function purge_set(key, what)
  local doomed = {}
  for _, member in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    if ours(member) then
      doomed[#doomed + 1] = member
      job_count(member, what, -1)
      job_count(member, 'purged', 1)
    end
  end
  for i = 1, #doomed, 1000 do
    redis.call('ZREM', key, unpack(doomed, i, math.min(i + 999, #doomed)))
  end
  return #doomed
end

local function purge_list(key)
  local all = redis.call('LRANGE', key, 0, -1)
  local kept = {}
  for _, member in ipairs(all) do
    if ours(member) then
      job_count(member, 'queued', -1)
      job_count(member, 'purged', 1)
    else
      kept[#kept + 1] = member
    end
  end
  local dropped = #all - #kept
  if dropped > 0 then
    redis.call('DEL', key)
    for i = 1, #kept, 1000 do
      redis.call('RPUSH', key, unpack(kept, i, math.min(i + 999, #kept)))
    end
  end
  return dropped
end

-- Remove the job's range of a jobs set; count them queued no more.
local function purge_jobs(key)
  local doomed = redis.call('ZRANGEBYLEX', key, '[' .. job .. ' ', '(' .. job .. '!')
  for i = 1, #doomed, 1000 do
    redis.call('ZREM', key, unpack(doomed, i, math.min(i + 999, #doomed)))
  end
  local changes = job_changes(job)
  changes.queued = (changes.queued or 0) - #doomed
  changes.purged = (changes.purged or 0) + #doomed
  return #doomed
end

for i = 1, hosts do
  queued = queued + purge_set(KEYS[3 + i], 'queued') + purge_list(KEYS[3 + 2 * hosts + i])
  queued = queued + purge_jobs(KEYS[3 + 3 * hosts + i])
  later = later + purge_set(KEYS[3 + hosts + i], 'later')
end
if ARGV[2] == '1' then
  local doomed = redis.call('ZRANGEBYLEX', KEYS[3], '[' .. job .. ' ', '(' .. job .. '!')
  for _, member in ipairs(doomed) do
    job_count(member, 'queued', -1)
    job_count(member, 'purged', 1)
  end
  for i = 1, #doomed, 1000 do
    redis.call('ZREM', KEYS[3], unpack(doomed, i, math.min(i + 999, #doomed)))
  end
  held = #doomed
end
if queued + later > 0 then redis.call('DECRBY', KEYS[1], queued + later) end
job_counts_done(KEYS[2])
return {queued, later, held}
