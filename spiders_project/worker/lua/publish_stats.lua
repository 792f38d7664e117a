-- Publish one worker's stats: its hash, its heartbeat and last-seen time, and
-- what its counters grew by since its previous publish, added to the spider's
-- totals; then record a (time, pages total) sample, and one a minute for the last hour.
--
-- Counters arrive as the worker's absolute values and the growth is computed
-- here, against the values its hash holds. So a publish sent twice (a
-- transaction replayed after a lost reply) or skipped (Redis was away) never
-- miscounts, and a new worker (a new hash) counts from zero: the totals never
-- go down when workers come and go.
--
-- Time is Redis' clock (TIME), one clock for every node, unless a test passes one.
--
-- KEYS[1]  the worker's hash (<spider>:worker:<id>)
-- KEYS[2]  the worker's heartbeat key (<spider>:worker:<id>:heartbeat)
-- KEYS[3]  sorted set of workers by last publish (<spider>:workers)
-- KEYS[4]  the spider's totals hash (<spider>:stats:totals)
-- KEYS[5]  sorted set of "<time> <pages total>" samples (<spider>:stats:samples)
-- KEYS[6]  the same, coarse and kept longer (<spider>:stats:history): the console's
--          chart of the last hour
-- ARGV[1]  now, in ms since the epoch, or "" for Redis' own clock (TIME): production
--          always passes ""; tests pass a time to step it
-- ARGV[2]  worker id ("host:pid")
-- ARGV[3]  run id, unique per process: tells a process from an earlier one with the same id
-- ARGV[4]  "1" on the process's first publish, else "0"
-- ARGV[5]  "1" while the worker runs; "0" for the last publish of a worker that stops
--          cleanly: its heartbeat is deleted and its id leaves the sorted set at once
-- ARGV[6]  heartbeat time to live, ms
-- ARGV[7]  retention, ms: of the worker's hash, and of ids in KEYS[3] not seen for that long
-- ARGV[8]  retention of samples, ms
-- ARGV[9]  the worker's state, stored in its hash as given
-- ARGV[10 .. 13]  the names of the hash fields this script writes: the worker id, the
--          run id, the state and the time of the publish (read_model/contract.py names
--          them all; no field name is spelled here)
-- ARGV[14] the name of the pages counter, whose total each sample records
-- ARGV[15] the least spacing of two samples of KEYS[6], ms: whichever worker publishes
--          first once it has passed adds one, so the cluster adds one, not one per worker
-- ARGV[16] retention of the samples of KEYS[6], ms
-- ARGV[17] N, the number of counters
-- ARGV[18 .. 17+2N]  counter field, absolute value (an integer), in pairs
-- ARGV[18+2N ..]     other stat field, value, in pairs, stored as given
-- Returns  the spider's pages total after this publish
local now = tonumber(ARGV[1])
if now then
  now = now / 1000
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local stamp = string.format('%.3f', now)
local worker_field, run_field, state_field, seen_field = ARGV[10], ARGV[11], ARGV[12], ARGV[13]
local pages_field = ARGV[14]
local n = tonumber(ARGV[17])
local PAIRS = 18  -- the index of the first counter's name

local run = redis.call('HGET', KEYS[1], run_field)
local count
if run == ARGV[3] then
  count = true -- this process published before: count the growth since then
elseif run then
  -- An earlier process with the same id (a reused pid): its counters are not ours.
  redis.call('DEL', KEYS[1])
  count = true
else
  -- No hash: the first publish of this process, or its hash expired while it
  -- could not reach Redis; then take its values as the new base, uncounted.
  count = ARGV[4] == '1'
end

if count then
  for i = PAIRS, PAIRS - 1 + 2 * n, 2 do
    local value = tonumber(ARGV[i + 1])
    local old = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
    if value > old then
      redis.call('HINCRBY', KEYS[4], ARGV[i], value - old)
    end
  end
end

-- Slices hold an even count from the first pair on: a slice never splits a pair.
for i = PAIRS, #ARGV, 1000 do
  redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[1], worker_field, ARGV[2], run_field, ARGV[3], state_field, ARGV[9],
  seen_field, stamp)
redis.call('PEXPIRE', KEYS[1], ARGV[7])

if ARGV[5] == '1' then
  redis.call('SET', KEYS[2], stamp, 'PX', ARGV[6])
  redis.call('ZADD', KEYS[3], stamp, ARGV[2])
else
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[3], ARGV[2])
end
local forgotten = string.format('(%.3f', now - tonumber(ARGV[7]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', forgotten)

local pages = redis.call('HGET', KEYS[4], pages_field) or '0'
redis.call('ZADD', KEYS[5], stamp, stamp .. ' ' .. pages)
local old_samples = string.format('(%.3f', now - tonumber(ARGV[8]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', old_samples)

local newest = redis.call('ZRANGE', KEYS[6], -1, -1, 'WITHSCORES')
if #newest == 0 or (now - tonumber(newest[2])) * 1000 >= tonumber(ARGV[15]) then
  redis.call('ZADD', KEYS[6], stamp, stamp .. ' ' .. pages)
  local old_history = string.format('(%.3f', now - tonumber(ARGV[16]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', old_history)
end
return tonumber(pages)
