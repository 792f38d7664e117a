-- Submit a crawl job (``scrapy jobs submit``): it is running, its seeds are
-- in start_urls, and its stream has said so, in one step.
--
-- KEYS[1]   jobs: hash job id -> record JSON
-- KEYS[2]   jobs:events: stream of the jobs' state changes
-- KEYS[3]   start_urls: the spider's seed list
-- ARGV[1]   now, in ms since the epoch, or "" for Redis' own clock (TIME): the
--           command passes "" (one clock for every node); tests pass a time
-- ARGV[2..] the run's arguments (submit_job.lua)
-- Returns   the run's started_at (ms).
--!include redis_access/lua/clock.lua
--!include submit_job.lua
local now = now_ms(ARGV[1])
submit_job(KEYS[1], KEYS[2], KEYS[3], now, 2)
return now
