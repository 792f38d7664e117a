#!lua flags=allow-oom
-- Allowed under OOM: it writes one key of a few dozen bytes. A script, not
-- SET NX PX, because a plain SET is refused while Redis is out of memory
-- (maxmemory with noeviction), and the db_writer, the one process that frees
-- Redis memory, must be able to start then.
--
-- Take the db_writer lock if nobody holds it. The lock is owned by a token
-- unique to each process run, never by a hostname and pid: replicas in
-- containers share both. A successor waits for the holder's release (a clean
-- stop) or for the TTL (a crash); nothing else takes a lock over.
--
-- Taking it again with the token that holds it extends it and answers 1, so
-- a call whose reply was lost can be repeated.
--
-- KEYS[1]  db_writer lock
-- ARGV[1]  this writer's token
-- ARGV[2]  time to live, in milliseconds
-- Returns  1 if the lock is now ours, 0 if another token holds it
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
  return 1
end
if holder then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
return 1
