#!lua flags=allow-oom
-- A host's robots.txt as the cluster knows it, or the right to fetch it.
--
-- KEYS[1]  the origin's robots.txt body (string with a TTL: ROBOTSTXT_TTL)
-- KEYS[2]  the origin's fetch lock (held by the one worker fetching it)
-- ARGV[1]  the caller's token (its worker id)
-- ARGV[2]  ms the lock lasts: a fetcher that dies frees it after this long
-- Returns  {body, ms it still lives} when known; else {false, 0, 1} when the
--          caller now holds the lock and must fetch it, or {false, 0, 0} when
--          another worker is fetching it (ask again shortly).
-- Allowed under OOM: the lock is a few bytes, and a worker must not stall.
local body = redis.call('GET', KEYS[1])
if body then return {body, redis.call('PTTL', KEYS[1])} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', tonumber(ARGV[2])) then
  return {false, 0, 1}
end
return {false, 0, 0}
