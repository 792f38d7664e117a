#!lua flags=allow-oom
-- Allowed under OOM: it only deletes.
--
-- Delete the db_writer lock if this writer still holds it.
--
-- KEYS[1]  db_writer lock
-- ARGV[1]  this writer's lock token
-- Returns  1 if deleted, 0 if the lock held another token (or nothing)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
return redis.call('DEL', KEYS[1])
