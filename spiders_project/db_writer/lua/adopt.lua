#!lua flags=allow-oom
-- Allowed under OOM: it moves entries from one list to another and deletes
-- the first, so memory ends where it began (the db_writer must drain a Redis
-- that is full).
--
-- Take over the batch of a writer that is gone: its lease expired (it was
-- killed, or stalled longer than DB_WRITER_LOCK_TTL) or it stopped leaving
-- entries behind. Its entries go to the tail of this writer's processing
-- list, after the batch this writer may hold, and it leaves the writers'
-- hash, so whatever it still sends (take, ack, heartbeat) changes nothing.
-- The previous release's one processing list is taken over the same way,
-- once its lock (KEYS[2]) is gone, with ARGV[1] "".
--
-- KEYS[1]  the gone writer's processing list
-- KEYS[2]  the gone writer's lease (the previous release's lock for its list)
-- KEYS[3]  the buffer's writers: hash writer id -> entries in its processing list
-- KEYS[4]  this writer's processing list
-- ARGV[1]  the gone writer's id ("" for the previous release's list)
-- ARGV[2]  this writer's id
-- Returns  the number of entries taken over; -1, changing nothing, when
--          KEYS[2] exists (the writer lives); false when ARGV[2] is no longer
--          in KEYS[3] itself
if redis.call('GET', KEYS[2]) then
  return -1
end
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 0 then
  return false
end
local entries = redis.call('LRANGE', KEYS[1], 0, -1)
local n = #entries
if n > 0 then
  local length
  for i = 1, n, 1000 do
    length = redis.call('RPUSH', KEYS[4], unpack(entries, i, math.min(i + 999, n)))
  end
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[3], ARGV[2], length)
end
if ARGV[1] ~= '' then
  redis.call('HDEL', KEYS[3], ARGV[1])
end
return n
