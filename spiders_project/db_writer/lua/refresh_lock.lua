#!lua flags=allow-oom
-- Allowed under OOM: it only changes the expiry of an existing key.
--
-- Extend the db_writer lock if this writer still holds it.
--
-- KEYS[1]  db_writer lock
-- ARGV[1]  this writer's token
-- ARGV[2]  time to live, in milliseconds
-- Returns  1 if extended, 0 if the lock holds another token (or nothing)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
