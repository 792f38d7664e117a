#!lua flags=allow-oom
-- Allowed under OOM: it writes one hash field and one key of a few dozen
-- bytes. A script, not plain HSET and SET, because those are refused while
-- Redis is out of memory (maxmemory with noeviction), and the db_writer, the
-- one process that frees Redis memory, must be able to start then.
--
-- Make this writer one of the buffer's writers: its entry in the writers'
-- hash (with what its processing list holds, which is nothing for a new
-- writer) and its lease. A writer joins at start, and again after it found
-- itself out of the hash (another writer took its batch over while it
-- stalled, or Redis lost the hash): then it holds no batch any more, and what
-- its list still holds (a Redis that lost the hash but not the list) is
-- counted and written again.
--
-- KEYS[1]  the buffer's writers: hash writer id -> entries in its processing list
-- KEYS[2]  this writer's lease (<spider>:db_writer:lease:<id>)
-- KEYS[3]  this writer's processing list
-- ARGV[1]  this writer's id, unique to the process run (never host and pid)
-- ARGV[2]  lease time to live, in milliseconds
-- Returns  the entries in this writer's processing list
local held = redis.call('LLEN', KEYS[3])
redis.call('HSET', KEYS[1], ARGV[1], held)
redis.call('SET', KEYS[2], ARGV[1], 'PX', tonumber(ARGV[2]))
return held
