-- Grant a delayed host's turn at the moment a request is about to be sent.
--
-- The lease script already spaces a host's requests by its delay, but a
-- leased request can leave its worker late (a busy event loop), landing
-- closer to the next worker's fetch than the delay. This gate, run by the
-- last downloader middleware, is what the site actually sees.
--
-- KEYS[1]  last fetch: hash host -> time (ms) of the last granted send
-- KEYS[2]  host delays: hash host -> delay (ms) the site asked for
-- ARGV[1]  the host
-- ARGV[2]  configured delay (ms); the larger of it and the site's applies
-- Returns  0 if granted (and recorded), else milliseconds to wait first.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local delay = tonumber(ARGV[2])
local asked = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if asked > delay then delay = asked end
local last = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local wait = last + delay - now
if wait > 0 then return wait end
redis.call('HSET', KEYS[1], ARGV[1], now)
return 0
