#!lua flags=allow-oom
-- Grant a delayed host's turn at the moment a request is about to be sent.
--
-- The lease script already spaces a host's requests by its delay, but a
-- leased request can leave its worker late (a busy event loop), landing
-- closer to the next worker's fetch than the delay. This gate, run by the
-- last downloader middleware, is what the site actually sees.
--
-- The turn is a key holding the time (ms) of the host's last granted send.
-- It expires a minute after the delay has passed, so it disappears by itself: nothing is
-- kept for hosts the crawl has left. (Its value, not its TTL, decides: a test
-- can step the clock, and a larger delay the site asks for applies at once.)
--
-- KEYS[1]  the host's turn key: time (ms) of its last granted send
-- KEYS[2]  host delays: hash host -> delay (ms) the site asked for
-- ARGV[1]  now, in ms since the epoch, or "" for Redis' own clock (TIME): production
--          always passes "" (one clock for every node); tests pass a time to step it
-- ARGV[2]  the host
-- ARGV[3]  configured delay (ms); the larger of it and the site's applies
-- ARGV[4]  delay (ms) the site asked this worker for (robots.txt Crawl-delay),
--          or 0: stored again, as the lease script forgets it with the host
-- Returns  0 if granted (and recorded), else milliseconds to wait first.
--!include redis_access/lua/clock.lua
local now = now_ms(ARGV[1])
local known = tonumber(ARGV[4])
if known > 0 then redis.call('HSET', KEYS[2], ARGV[2], known) end
local delay = tonumber(ARGV[3])
local asked = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if asked > delay then delay = asked end
if delay <= 0 then return 0 end
local last = tonumber(redis.call('GET', KEYS[1]) or '')
if last and now < last + delay then
  -- A last send in the future (a clock stepped back) waits one delay at most.
  return math.min(last + delay - now, delay)
end
redis.call('SET', KEYS[1], now, 'PX', delay + 60000)
return 0
