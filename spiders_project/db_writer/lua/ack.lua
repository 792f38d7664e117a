#!lua flags=allow-oom
-- Allowed under OOM, because it never leaves Redis fuller than it found it:
-- it trims the whole batch (ARGV[3] entries) from the processing list, and the
-- rejected entries it keeps are byte-for-byte copies of some of those same
-- entries (entries that are not items, or rows the database refused), so the
-- RPUSH adds at most what the LTRIM frees. The counters are four fields of one
-- small hash that exist after the first batch, the writers' hash gets one
-- number changed and the lease is set again. The db_writer is the one process
-- that frees Redis memory, so it must be able to acknowledge while Redis is
-- full.
--
-- Acknowledge a committed batch: drop it from the head of this writer's
-- processing list, keep its rejected entries, count it, and renew the
-- writer's lease, atomically.
--
-- Only this writer appends to its processing list, so while ARGV[1] is among
-- the buffer's writers the batch is the list's first ARGV[3] entries, unless a
-- take whose reply was lost put entries before it (ARGV[6], ARGV[7] tell).
--
-- KEYS[1]  this writer's processing list (<spider>:items:processing:<id>)
-- KEYS[2]  rejected list (<spider>:items:rejected), raw entries kept as read
-- KEYS[3]  stats hash (<spider>:db_writer:stats)
-- KEYS[4]  the buffer's writers: hash writer id -> entries in its processing list
-- KEYS[5]  this writer's lease (<spider>:db_writer:lease:<id>)
-- ARGV[1]  this writer's id
-- ARGV[2]  lease time to live, in milliseconds
-- ARGV[3]  number of entries in the batch (written and rejected)
-- ARGV[4]  number of items written
-- ARGV[5]  time of the batch, Unix seconds (stored as last_batch_at)
-- ARGV[6]  the batch's first entry, ARGV[7] its last, byte for byte: the list's
--          first ARGV[3] entries must start and end with them, or nothing is
--          changed and -1 returned. A take whose reply was lost (a partition)
--          leaves entries at the head that the writer never saw; trimming by
--          count would then drop them unwritten. The writer reads its list
--          again from the head instead, and writes them.
-- ARGV[8..] the rejected entries, byte for byte
-- Returns  1; -1 (nothing changed) when the list does not start with the batch;
--          or 0 without changing anything when ARGV[1] is no longer in
--          KEYS[4] (another writer took its batch over)
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 0 then
  return 0
end
-- Trim first: memory goes down before the rejected copies are pushed.
local count = tonumber(ARGV[3])
if redis.call('LINDEX', KEYS[1], 0) ~= ARGV[6]
    or redis.call('LINDEX', KEYS[1], count - 1) ~= ARGV[7] then
  return -1
end
redis.call('LTRIM', KEYS[1], count, -1)
local rejected = #ARGV - 7
for i = 8, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HINCRBY', KEYS[3], 'items_written', tonumber(ARGV[4]))
redis.call('HINCRBY', KEYS[3], 'rejected', rejected)
redis.call('HINCRBY', KEYS[3], 'batches', 1)
redis.call('HSET', KEYS[3], 'last_batch_at', ARGV[5])
redis.call('HSET', KEYS[4], ARGV[1], redis.call('LLEN', KEYS[1]))
redis.call('SET', KEYS[5], ARGV[1], 'PX', tonumber(ARGV[2]))
return 1
