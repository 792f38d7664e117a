#!lua flags=allow-oom
-- Allowed under OOM: it sets again one key of a few dozen bytes.
--
-- A writer's heartbeat: renew its lease while it is still one of the buffer's
-- writers. Set, not only extended: a lease that expired while its writer
-- stalled, and whose batch nobody took over yet, is the writer's again.
--
-- KEYS[1]  the buffer's writers: hash writer id -> entries in its processing list
-- KEYS[2]  this writer's lease (<spider>:db_writer:lease:<id>)
-- ARGV[1]  this writer's id
-- ARGV[2]  lease time to live, in milliseconds
-- Returns  1 if renewed, 0 when ARGV[1] is no longer in KEYS[1] (another writer
--          took its batch over)
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', tonumber(ARGV[2]))
return 1
