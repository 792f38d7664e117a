#!lua flags=allow-oom
-- Share a fetched robots.txt with the cluster and release the fetch lock.
--
-- KEYS[1]  the origin's robots.txt body
-- KEYS[2]  the origin's fetch lock
-- ARGV[1]  the body ("" for a site without one: everything is allowed)
-- ARGV[2]  ms it is kept (ROBOTSTXT_TTL, or less after an error)
-- ARGV[3]  the caller's token: the lock is released only if still its own
-- Returns  1
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
if redis.call('GET', KEYS[2]) == ARGV[3] then redis.call('DEL', KEYS[2]) end
return 1
