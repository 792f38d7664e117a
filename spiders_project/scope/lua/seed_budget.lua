#!lua flags=allow-oom
-- Count one page against its seed's max_pages, for the whole cluster.
--
-- KEYS[1]  the seed's page counter (<spider>:seed:<id>:pages; on a sharded
--          frontier {<spider>/<n>}:seed:<id>:pages, n the shard of its id)
-- ARGV[1]  seconds the counter outlives its last page (a crawl's lifetime)
-- Returns  the count including this page; the caller fetches it only if that
--          is at most max_pages. (Allowed under OOM: one small counter.)
local n = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]))
return n
