#!lua flags=allow-oom
-- Grant a delayed host's turn at the moment a request is about to be sent.
--
-- The lease script already spaces a host's requests by its delay, but a
-- leased request can leave its worker late (a busy event loop), landing
-- closer to the next worker's fetch than the delay. This gate, run by the
-- last downloader middleware, is what the site actually sees.
--
-- The turn is a key that lives for the delay after each granted send, so it
-- disappears by itself: nothing is kept for hosts the crawl has left.
--
-- KEYS[1]  the host's turn key (exists while its last send is younger than the delay)
-- KEYS[2]  host delays: hash host -> delay (ms) the site asked for
-- ARGV[1]  the host
-- ARGV[2]  configured delay (ms); the larger of it and the site's applies
-- ARGV[3]  delay (ms) the site asked this worker for (robots.txt Crawl-delay),
--          or 0: stored again, as the lease script forgets it with the host
-- Returns  0 if granted (and recorded), else milliseconds to wait first.
local known = tonumber(ARGV[3])
if known > 0 then redis.call('HSET', KEYS[2], ARGV[1], known) end
local delay = tonumber(ARGV[2])
local asked = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if asked > delay then delay = asked end
if delay <= 0 then return 0 end
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', delay) then return 0 end
local wait = redis.call('PTTL', KEYS[1])
if wait < 1 then wait = 1 end
return wait
