-- Change a crawl job's state (scrapy jobs pause|resume|cancel, and a worker
-- finding it finished or seeded again): its record, the spider's job control
-- and one event carrying the job's counts, in one step, only if the record is
-- still the one the caller read (compare-and-set): two operators, or an
-- operator and a worker, never both change it from the same state.
--
-- KEYS[1]   jobs: hash job id -> record JSON
-- KEYS[2]   jobs:events: stream of the jobs' state changes
-- KEYS[3]   jobs:control: hash job -> "paused" or "cancelled" (a running or
--           finished job has no field); the lease and enqueue scripts read it
--           (a sharded frontier reads its shards' copies, written after this)
-- KEYS[4]   jobs:quiet: hash job -> since when it had nothing to do (cleared)
-- ARGV[1]   the job id
-- ARGV[2]   its record as the caller read it, "" if it had none
-- ARGV[3]   its new record
-- ARGV[4]   its new state
-- ARGV[5]   its control: "paused", "cancelled", or "" for none
-- ARGV[6]   the events stream's MAXLEN (approximate)
-- ARGV[7..] the event's other fields, in pairs (why, at, the counts)
-- Returns   1 if changed, 0 if the record changed since it was read.
local job = ARGV[1]
if (redis.call('HGET', KEYS[1], job) or '') ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], job, ARGV[3])
if ARGV[5] == '' then
  redis.call('HDEL', KEYS[3], job)
else
  redis.call('HSET', KEYS[3], job, ARGV[5])
end
redis.call('HDEL', KEYS[4], job)
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'job', job, 'state', ARGV[4],
  unpack(ARGV, 7))
return 1
