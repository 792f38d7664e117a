-- Run one tick of a job's schedule, once for the whole cluster: claim the tick
-- (compare-and-set of the schedule's entry, which holds the last tick run) and
-- submit the job's run in the same step, so a worker dying in between cannot
-- claim a tick without running it, nor run it without claiming it.
--
-- Every worker's schedule loop may call this for the same tick; only the first
-- finds the entry it read. A tick later than Redis' clock is refused, so a
-- worker whose own clock runs ahead cannot run a tick early.
--
-- KEYS[1]   jobs:schedules: hash job id -> schedule JSON (with its last tick)
-- KEYS[2]   jobs: hash job id -> record JSON
-- KEYS[3]   jobs:events: stream of the jobs' state changes
-- KEYS[4]   start_urls: the spider's seed list
-- ARGV[1]   now, in ms since the epoch, or "" for Redis' own clock (TIME):
--           production passes ""; tests pass a time to step the clock
-- ARGV[2]   the tick (ms): the latest time the cron expression names, at most now
-- ARGV[3]   the schedule's entry as the caller read it
-- ARGV[4]   the entry to store: the same schedule, its last tick ARGV[2]
-- ARGV[5..] the run's arguments (submit_job.lua); ARGV[5] is the job id
-- Returns   1: this call ran the tick; 0: the entry changed since it was read
--           (another worker ran the tick, or the schedule was changed or
--           removed); -1: the tick is later than now.
--!include redis_access/lua/clock.lua
--!include submit_job.lua
local now = now_ms(ARGV[1])
if tonumber(ARGV[2]) > now then
  return -1
end
if redis.call('HGET', KEYS[1], ARGV[5]) ~= ARGV[3] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[5], ARGV[4])
submit_job(KEYS[2], KEYS[3], KEYS[4], now, 5)
return 1
