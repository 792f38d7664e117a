#!lua flags=allow-oom
-- Allowed under OOM: it only deletes.
--
-- A writer's clean stop: it leaves the writers' hash when its processing list
-- is empty, and drops its lease either way, so a batch it could not finish
-- (Redis refused the ack, the database was away) is taken over by another
-- writer at its next look instead of after DB_WRITER_LOCK_TTL.
--
-- KEYS[1]  the buffer's writers: hash writer id -> entries in its processing list
-- KEYS[2]  this writer's lease (<spider>:db_writer:lease:<id>)
-- KEYS[3]  this writer's processing list
-- ARGV[1]  this writer's id
-- Returns  the entries left in its processing list, for another writer
local left = redis.call('LLEN', KEYS[3])
if left == 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
end
return left
