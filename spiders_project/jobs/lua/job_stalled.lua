-- A running job that fetched nothing for JOB_STALL_AFTER seconds: its one
-- "stalled" event (jobs/stalls.py), written only if the job's stall mark and
-- its record are still those the worker's look read, so two looks that
-- overlap write one event, and a stall that ended in between none.
--
-- KEYS[1]   jobs:stalls: hash job -> "<since ms> <said 0|1> <run|pages>"
-- KEYS[2]   jobs:events: stream of the jobs' state changes
-- KEYS[3]   jobs: hash job id -> record JSON
-- ARGV[1]   the job id
-- ARGV[2]   its stall mark as read
-- ARGV[3]   its stall mark once the event is written
-- ARGV[4]   its record as read, "" if it had none
-- ARGV[5]   the events stream's MAXLEN (approximate)
-- ARGV[6..] the event's other fields, in pairs (via, at, since, the counts)
-- Returns   1 if the event was written, 0 if the mark or the record changed.
local job = ARGV[1]
if redis.call('HGET', KEYS[1], job) ~= ARGV[2] then
  return 0
end
if (redis.call('HGET', KEYS[3], job) or '') ~= ARGV[4] then
  return 0
end
redis.call('HSET', KEYS[1], job, ARGV[3])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'job', job, 'state', 'stalled',
  unpack(ARGV, 6))
return 1
