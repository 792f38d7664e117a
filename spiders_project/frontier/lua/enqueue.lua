-- Deduplicate a batch of requests and add them to their hosts' queues, in one
-- round trip. Seeds are claimed from start_urls in the same step, so a seed
-- leaves that list exactly when its request enters the frontier (or the
-- rejected list): a worker killed at any moment neither loses nor doubles it.
-- A shard of a sharded frontier cannot reach start_urls (another slot): there
-- a seed's request counts only if the shard has not taken that seed lately
-- (KEYS[6] is then seeds:taken, ARGV[3] its window), and the caller removes
-- the entry from start_urls after this call.
--
-- KEYS[1]    seen: the seen-set's counter, and the prefix of its buckets (seen.lua)
-- KEYS[2]    dupefilter: the previous release's set of hex fingerprints (seen.lua)
-- KEYS[3]    seq: counter giving first-in first-out order within a priority
-- KEYS[4]    hosts: ready-set, host -> time (ms) it may next be fetched
-- KEYS[5]    size: counter of queued requests
-- KEYS[6]    start_urls: list of seeds as operators pushed them; in a shard,
--            seeds:taken: sorted set, seed digest -> time (ms) it was taken
-- KEYS[7]    start_urls:rejected: seeds that are not valid requests (untouched in a shard)
-- KEYS[7+i]  queue of the i-th host of this batch (sorted set of JSON requests)
-- KEYS[7+H+i] retries of the i-th host waiting for their time (its "later" set)
-- KEYS[7+2H+i] list of the i-th host: its new priority-0 requests, first in first out
-- KEYS[7+3H+i] jobs set of the i-th host: the requests of jobs other than the
--            default one, wherever the default job's would go (job_queues.lua)
-- KEYS[8+4H] job counts: hash "<job>|queued" / "<job>|later" -> requests (job_counts.lua)
-- KEYS[9+4H] job control: hash job -> "paused" or "cancelled" (scrapy jobs pause|cancel):
--            a new request of a cancelled job is recorded as seen and dropped,
--            counted purged for its job, not queued; read only while not empty
-- KEYS[10+4H] job turns: hash host -> the job its last lease served (job_queues.lua)
-- ARGV[1]    now, in ms since the epoch, or "" for Redis' own clock (TIME): production
--            always passes "" (one clock for every node); tests pass a time to step it
-- ARGV[2]    the seen-set's mode (seen.lua: "exact" or "bloom ...")
-- ARGV[3]    "" to claim seeds from start_urls; in a shard, the ms a taken
--            seed is remembered
-- ARGV[4]    H, the number of hosts in this batch
-- ARGV[4+i]  name of the i-th host (i = 1..H), as in its queue key
-- ARGV[H+5]  S, the number of requests given in full (below); the others are links
-- ARGV[H+6..] S septuples (position, fingerprint, priority, payload, host index i, seed, wait),
--            position the request's place (0-based) in the call's order, ascending:
--              fingerprint ""       never filtered, not recorded
--              fingerprint "!<fp>"  recorded, but enqueued even if seen (seeds)
--              fingerprint "<fp>"   enqueued only if not seen before
--              fingerprint "~<fp>"  never enqueued: a link refused before its queue;
--                                   recorded, and counted refused for the payload's
--                                   job if not seen before (<fp> salted with the job)
--              (<fp> a token of seen.lua)
--              priority is an integer in [-4000, 4000]; higher pops first
--              seed "" for a request; else the raw start_urls entry it came
--              from: skipped unless this call removes that entry (another
--              worker may have claimed it); host index 0 rejects the seed;
--              in a shard, the entry's digest: skipped if taken lately
--              wait: ms before the request may be fetched (a retry's backoff),
--              or 0; a waiting request goes to the host's later set as
--              "<queue score> <payload>", scored by its time, and lease.lua
--              moves it into the queue, at its place, once that time has come
-- ARGV[H+6+7S..] then triples (fingerprint "<fp>", payload, host index i), one a link:
--            the usual followed link (a fingerprint, priority 0, no seed, no
--            wait), the places the septuples leave, in order. Three arguments
--            a link instead of six, and no checks of the rest: reading a link's
--            arguments was a large share of enqueue's time (docs/BENCHMARKS.md).
-- Returns    {enqueued, rejected seed...}: enqueued is the number of members
--            Redis really added, so a payload already queued (a seed pushed
--            twice, a resent transaction) neither counts twice in size nor
--            moves (ZADD NX); then the seed entries this call moved to
--            start_urls:rejected, which the caller reports (once in the
--            cluster: a worker whose reject lost the race reports nothing).
--            Each request really added counts for its job, queued or later
--            (waiting), as it counts in size.
--
-- Where a request goes: a request of a job other than the default one goes to
-- its host's jobs set, in its queue order (job_queues.lua), so that the jobs
-- of a host take turns; a waiting one (a retry) to the later set, as any.
-- Of the default job's: a new request with a fingerprint, priority 0 and no
-- wait (the usual followed link) is RPUSHed to its host's list, where it costs
-- about 3 bytes besides its JSON (a sorted set member costs about 90); its
-- fingerprint already keeps it from being queued twice. Every other request
-- goes to the host's sorted set by score, where ZADD NX keeps a payload queued
-- once (seeds, never-filtered requests). lease.lua gives the sorted set's
-- higher priorities first, then the list, then the rest of the sorted set,
-- and, when the host has other jobs' requests too, one request a job in turn.
--
-- No shebang: a flagged script costs Redis more CPU per crawled page
-- (docs/BENCHMARKS.md). Under OOM or on a replica this script fails
-- at its first write (INCRBY), before changing anything; callers that send it
-- inside MULTI with other writes add a write Redis refuses at queue time
-- (``calls.REFUSE_GUARD``), so the transaction is refused whole.
--
-- Score = -priority * 2^40 + seq stays an exact integer in a double. A host
-- already in the ready-set keeps its time (NX), so politeness survives a
-- queue that ran empty and refilled; a host new to it is ready at once, or
-- when the first of this batch's waiting requests is due.
--!include redis_access/lua/clock.lua
--!include seen.lua
--!include job_queues.lua
local control = KEYS[9 + 4 * tonumber(ARGV[4])]
local turns = KEYS[10 + 4 * tonumber(ARGV[4])]
local controlled = nil  -- whether any job is paused or cancelled: asked at the first new request
local cancelled = {}
local window = tonumber(ARGV[3])
local h = tonumber(ARGV[4])
local full = tonumber(ARGV[h + 5])
local links_at = h + 6 + 7 * full
local n = full + (#ARGV - links_at + 1) / 3
if n == 0 then return {0} end
local seq = redis.call('INCRBY', KEYS[3], n) - n
local now = now_ms(ARGV[1])
seen_init(KEYS[1], KEYS[2], ARGV[2], now)
local enqueued = 0
local reply = {0}
local touched = {}
local swept = false
local pushes = {}  -- host index -> its new list requests, pushed after the loop
local job_adds = {}  -- host index -> {0, member, ...} for its jobs set, added after the loop

-- A new request at `score` for host i's jobs set (another job than the
-- default one's) or for the end of its list (the loop below writes them).
local function push_link(i, payload, score)
  local job = job_of(payload)
  local changes = job_changes(job)
  changes.queued = (changes.queued or 0) + 1
  enqueued = enqueued + 1
  if not touched[i] or now < touched[i] then touched[i] = now end
  local list, entry = pushes, payload
  if job ~= 'default' then
    list, entry = job_adds, job_member(job, score, payload)
  end
  local adds = list[i]
  if not adds then
    adds = {}
    list[i] = adds
  end
  if list == job_adds then adds[#adds + 1] = 0 end
  adds[#adds + 1] = entry
end

-- Whether a new request of job control's cancelled jobs is dropped (and counted purged).
local function purged(payload)
  if controlled == nil then controlled = redis.call('HLEN', control) > 0 end
  if not controlled then return false end
  -- After the seen-set: a link found twice is dropped (and counted) once.
  local job = job_of(payload)
  if cancelled[job] == nil then cancelled[job] = redis.call('HGET', control, job) == 'cancelled' end
  if cancelled[job] then job_count(payload, 'purged', 1) end
  return cancelled[job]
end

-- One request given in full: a septuple from ARGV[base] (its position) on.
local function request(base)
  local fp = ARGV[base + 1]
  local priority = tonumber(ARGV[base + 2])
  local payload = ARGV[base + 3]
  local i = tonumber(ARGV[base + 4])
  local seed = ARGV[base + 5]
  local add = true
  if seed ~= '' and window then
    if not swept then
      redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now - window)
      swept = true
    end
    add = redis.call('ZADD', KEYS[6], 'NX', now, seed) == 1
  elseif seed ~= '' then
    add = redis.call('LREM', KEYS[6], -1, seed) == 1
    if add and i == 0 then
      redis.call('LPUSH', KEYS[7], seed)
      reply[#reply + 1] = seed
      add = false
    end
  end
  if add and fp ~= '' then
    local mark = string.sub(fp, 1, 1)
    if mark == '!' then
      seen_add(string.sub(fp, 2))
    elseif mark == '~' then
      -- A link refused before its queue (frontier/refused.py): counted once per URL.
      if seen_add(string.sub(fp, 2)) then job_count(payload, 'refused', 1) end
      add = false
    else
      add = seen_add(fp)
    end
  end
  if not add or purged(payload) then return end
  seq = seq + 1
  local score = -priority * 1099511627776 + seq
  local due = now + (tonumber(ARGV[base + 6]) or 0)
  if due > now then
    local added = redis.call(
      'ZADD', KEYS[7 + h + i], 'NX', due, string.format('%.0f', score) .. ' ' .. payload)
    if added == 1 then job_count(payload, 'later', 1) end
    enqueued = enqueued + added
  elseif fp ~= '' and string.sub(fp, 1, 1) ~= '!' and priority == 0 then
    push_link(i, payload, seq)
    return
  else
    local job = job_of(payload)
    local added
    if job == 'default' then
      added = redis.call('ZADD', KEYS[7 + i], 'NX', score, payload)
    else
      job_turn_of(turns, ARGV[4 + i])
      added = redis.call('ZADD', KEYS[7 + 3 * h + i], 'NX', 0, job_member(job, score, payload))
    end
    if added == 1 then job_count(payload, 'queued', 1) end
    enqueued = enqueued + added
  end
  if not touched[i] or due < touched[i] then touched[i] = due end
end

local function each_request()
  local next_full = h + 6  -- the next septuple's first argument (its position)
  local at = full > 0 and tonumber(ARGV[next_full]) or -1
  local link = links_at
  for j = 0, n - 1 do
    if j == at then
      request(next_full)
      next_full = next_full + 7
      at = next_full < links_at and tonumber(ARGV[next_full]) or -1
    else
      -- A link: its queue is its host's list (the septuples' header says why).
      local payload = ARGV[link + 1]
      if seen_add(ARGV[link]) and not purged(payload) then
        seq = seq + 1
        push_link(tonumber(ARGV[link + 2]), payload, seq)
      end
      link = link + 3
    end
  end
end
-- New list requests go out in one RPUSH a host, after the loop (one per
-- request was a good share of this script's time: docs/BENCHMARKS.md). The loop runs in pcall so that whatever
-- fails in it (a malformed token, a key of the wrong type), the links it
-- marked seen are still pushed and counted before the error goes back: Redis
-- keeps what a script wrote before an error, so none is ever seen but not queued.
local ok, err = pcall(each_request)
for i, list in pairs(pushes) do
  for s = 1, #list, 1000 do
    redis.call('RPUSH', KEYS[7 + 2 * h + i], unpack(list, s, math.min(s + 999, #list)))
  end
end
for i, adds in pairs(job_adds) do
  job_turn_of(turns, ARGV[4 + i])
  for s = 1, #adds, 1000 do
    redis.call('ZADD', KEYS[7 + 3 * h + i], unpack(adds, s, math.min(s + 999, #adds)))
  end
end
for i, due in pairs(touched) do
  redis.call('ZADD', KEYS[4], 'NX', due, ARGV[4 + i])
end
seen_done()
if enqueued > 0 then redis.call('INCRBY', KEYS[5], enqueued) end
job_counts_done(KEYS[8 + 4 * h])
if not ok then error(err, 0) end
reply[1] = enqueued
return reply
