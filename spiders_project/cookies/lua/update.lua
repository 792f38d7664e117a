-- Apply one change to a shared cookie jar, or renew its time to live (no change).
--
-- Not flagged allow-oom: under OOM this write is refused, and the batcher's
-- guard makes Redis refuse the whole tick with it (frontier/write_behind/
-- transaction.py), so a page's links never go in without its cookies.
--
-- KEYS[1]  the jar: hash of "<domain>\t<path>\t<name>" -> cookie JSON, and
--          "~v" (its version: set to now, in ms, when the jar is made, then +1
--          per change, so a jar deleted and made again never repeats a version
--          a worker's copy was read at)
-- KEYS[2]  the spider's jars: sorted set of jar id -> time (ms) of last update or use
-- KEYS[3]  the spider's jar counts: hash of jar id -> cookies in it
-- ARGV[1]  now, in ms since the epoch, or "" for Redis' own clock (TIME)
-- ARGV[2]  the jar's id
-- ARGV[3]  the jar's time to live (ms) after this update or use (COOKIES_JAR_TTL)
-- ARGV[4]  the proxy the cookies came through, or "": a jar pinned to another
--          proxy (its session made through that one, or retired: session.lua)
--          takes none of them; a jar not pinned yet is pinned to it by a
--          change that sets a cookie (its session's first)
-- ARGV[5]  n: cookie fields to set
-- ARGV[6..5+2n]        field, value: the cookies to set
-- ARGV[6+2n..]         fields to delete
--          A field starting with "~" other than "~v" (a jar's pinned proxy, its
--          login state) is set and deleted the same way, and not counted.
-- Returns  the jar's version after the change; 0 for a renewal of a jar that
--          no longer exists (nothing is made then); -1 for a change refused
--          because the jar is pinned to another proxy.
--!include redis_access/lua/clock.lua
local now = now_ms(ARGV[1])
local jar, jars, counts = KEYS[1], KEYS[2], KEYS[3]
local id, ttl, via, n = ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local first_delete = 6 + 2 * n
local changed = n > 0 or #ARGV >= first_delete
local version = 0
local pinned = false
if via ~= '' then
  pinned = redis.call('HGET', jar, '~proxy')
  if pinned and pinned ~= via then
    return -1
  end
end
if redis.call('EXISTS', jar) == 0 then
  if not changed then
    return 0
  end
  redis.call('HSET', jar, '~v', now)
end
if changed then
  for i = 6, first_delete - 1, 2 do
    redis.call('HSET', jar, ARGV[i], ARGV[i + 1])
  end
  for i = first_delete, #ARGV do
    redis.call('HDEL', jar, ARGV[i])
  end
  version = redis.call('HINCRBY', jar, '~v', 1)
  local cookies = 0
  for _, field in ipairs(redis.call('HKEYS', jar)) do
    if string.sub(field, 1, 1) ~= '~' then
      cookies = cookies + 1
    end
  end
  redis.call('HSET', counts, id, cookies)
  if via ~= '' and not pinned and n > 0 then
    redis.call('HSET', jar, '~proxy', via)
  end
else
  version = tonumber(redis.call('HGET', jar, '~v')) or 0
end
redis.call('PEXPIRE', jar, ttl)
redis.call('ZADD', jars, now, id)
-- Jars idle past their time to live: their hashes expired; out of the index and counts.
local idle = redis.call('ZRANGEBYSCORE', jars, '-inf', now - ttl, 'LIMIT', 0, 100)
for _, old in ipairs(idle) do
  redis.call('ZREM', jars, old)
  redis.call('HDEL', counts, old)
end
return version
