#!lua flags=allow-oom
-- The command-by-command ack.lua (before issue 29 batched it), kept as the
-- reference tests/integration/test_ack_batched.py compares the batched
-- script with: both must leave Redis in the same state for any input.
-- Give back the cap slots of leases whose download ended, and end leases for
-- good (processed, rejected or dead).
--
-- KEYS[1]  leases: sorted set of lease ids, score = deadline (ms)
-- KEYS[2]  lease info: hash lease id -> "<queue score> <#host> <host><request>"
-- KEYS[3]  in flight: hash host -> its requests leased and not yet downloaded
-- KEYS[4]  cap waiters: hash host -> workers that found it at its cap (out of the ready-set)
-- KEYS[5]  hosts: ready-set, host -> time (ms) it may next be fetched
-- KEYS[6]  cap handover: hash host -> "<until ms> <worker>" (see below)
-- KEYS[7]  released: set of lease ids whose slot was given back, lease kept
-- KEYS[8]  job counts: hash "<job>|<count>" (job_counts.lua): each lease ended
--          moves its request from leased to acked, and counts a page and its
--          items, or a dead letter, if it is one of the P (with the marks of
--          its job's rate: below); each slot given back leaves its lease's
--          job's slots, and a slot passed on moves from one job's to the other's
-- ARGV[1]  now, in ms since the epoch, or "" for Redis' own clock (TIME): production
--          always passes "" (one clock for every node); tests pass a time to step it
-- ARGV[2]  R, the number of releases
-- ARGV[3..2+R]  lease ids of the caller whose download ended: the slot comes
--          back now, the lease stays until its page is processed (a worker
--          killed meanwhile still loses nothing)
-- ARGV[3+R]     T, the number of transfers
-- ARGV[4+R..3+R+2T]  pairs (lease id whose download ended, spare lease id) of the
--          caller: the slot of the first passes to the second, a spare that
--          holds none (lease.lua), whose download started in its place
-- ARGV[4+R+2T]  P, the number of leases to end whose page was fetched (a
--          response reached the spider): they count as their job's pages
-- ARGV[5+R+2T..4+R+2T+2P] pairs (lease id, items scraped from its page), or
--          (lease id, -1) for a request that failed for good, (lease id, -2)
--          for one refused (robots.txt), (lease id, -3) for one dropped (a
--          blocked host's): its job counts a dead letter, a refused or a
--          purged request, not a page
-- ARGV[5+R+2T+2P..] the other lease ids of the caller to end
-- Returns  the number of leases ended.
--          Only a lease this call removes counts (ZREM), so a resent
--          transaction counts nothing twice.
--
-- A transfer leaves the host's count of slots as it is: the worker started
-- the spare's download only once the first one's had ended. If the first
-- lease no longer holds a slot (it expired and was put back meanwhile), the
-- spare takes one; if the spare's lease is gone, the first's slot comes back.
--
-- The cap counts downloads, as Scrapy's own per-domain slot does: a slot
-- comes back when the download ends, not when the page's items are written
-- (which waits for the next write tick), or a capped host would sit idle for
-- that long each time (docs/BENCHMARKS.md, issue 12). A lease ended without a
-- release (dropped before its download) gives its slot back then; one
-- released earlier does not give it twice.
--
-- Lease ids are unique, so this touches only the caller's own leases: one
-- that expired and was put back (requeue.lua gave its slot back then) has a
-- new id, and a late release or ack of the old one finds nothing.
--
-- Fair hand-over: a capped host whose slot comes back is ready again at once,
-- and the worker that gave the slot back would take it again on its next call,
-- before any waiting worker looks (they poll every CAP_POLL ms, lease.lua), so
-- one worker would keep the host to itself. When other workers found the host
-- at its cap, the slot is theirs for HANDOVER ms: longer than their poll.
-- Allowed under OOM: it frees more than it writes.
local HANDOVER = 30
local RATE_MARK = 30000
--!include redis_access/lua/clock.lua
--!include frontier/lua/job_counts.lua
local now = now_ms(ARGV[1])

-- The slots of the job of a lease (its info) change by `by`.
local function job_slots(info, by)
  if not info then return end
  local changes = job_changes(job_of(info))
  changes.slots = (changes.slots or 0) + by
end

local function give_slot_back(id, info)
  if not info or string.sub(id, 1, 1) == '{' then return end  -- previous release: no slot
  local len, start = string.match(info, '^%S+ (%d+) ()')
  if not len then return end
  local host = string.sub(info, start, start + tonumber(len) - 1)
  job_slots(info, -1)
  if redis.call('HINCRBY', KEYS[3], host, -1) <= 0 then redis.call('HDEL', KEYS[3], host) end
  local waiting = redis.call('HGET', KEYS[4], host)
  if not waiting then return end
  redis.call('HDEL', KEYS[4], host)
  redis.call('ZADD', KEYS[5], 'NX', now, host)
  local by = string.match(id, '^(.*)/%d+$') or ''
  for worker in string.gmatch(waiting, '%S+') do
    if worker ~= by then
      redis.call('HSET', KEYS[6], host, (now + HANDOVER) .. ' ' .. by)
      return
    end
  end
end

local function release(id)
  if redis.call('ZSCORE', KEYS[1], id) and redis.call('SADD', KEYS[7], id) == 1 then
    give_slot_back(id, redis.call('HGET', KEYS[2], id))
  end
end

local releases = tonumber(ARGV[2])
local transfers = tonumber(ARGV[3 + releases])
local first = 4 + releases
for i = first, first + 2 * transfers - 1, 2 do
  local from, to = ARGV[i], ARGV[i + 1]
  if redis.call('ZSCORE', KEYS[1], to) and redis.call('SREM', KEYS[7], to) == 1 then
    job_slots(redis.call('HGET', KEYS[2], to), 1)
    if redis.call('ZSCORE', KEYS[1], from) and redis.call('SADD', KEYS[7], from) == 1 then
      job_slots(redis.call('HGET', KEYS[2], from), -1)
    else
      local info = redis.call('HGET', KEYS[2], to)
      local len, start = string.match(info or '', '^%S+ (%d+) ()')
      if len then
        redis.call('HINCRBY', KEYS[3], string.sub(info, start, start + tonumber(len) - 1), 1)
      end
    end
  else
    release(from)
  end
end
for i = 3, 2 + releases do
  release(ARGV[i])
end
local ended = 0
local paged = {}  -- job -> pages this call ended

-- End one lease; items: nil if no page of it was fetched, else its items,
-- or -1: it failed for good (a dead letter), -2: it was refused after its
-- lease (robots.txt), -3: a step dropped it (a blocked host's: purged)
-- (frontier/outcomes.py).
local function finish(id, items)
  if redis.call('ZREM', KEYS[1], id) ~= 1 then return end
  ended = ended + 1
  local info = redis.call('HGET', KEYS[2], id)
  redis.call('HDEL', KEYS[2], id)
  if redis.call('SREM', KEYS[7], id) == 0 then give_slot_back(id, info) end
  if not info then return end
  local job = job_of(info)
  local changes = job_changes(job)
  changes.leased = (changes.leased or 0) - 1
  changes.acked = (changes.acked or 0) + 1
  if items == -1 then
    changes.dead_letters = (changes.dead_letters or 0) + 1
  elseif items == -2 then
    changes.refused = (changes.refused or 0) + 1
  elseif items == -3 then
    changes.purged = (changes.purged or 0) + 1
  elseif items then
    paged[job] = (paged[job] or 0) + 1
    if items > 0 then changes.items = (changes.items or 0) + items end
  end
end

local at = first + 2 * transfers
local pages = tonumber(ARGV[at])
for k = 1, pages do
  finish(ARGV[at + 2 * k - 1], tonumber(ARGV[at + 2 * k]) or 0)
end
for i = at + 2 * pages + 1, #ARGV do
  finish(ARGV[i], nil)
end
job_counts_done(KEYS[8])
-- Pages, and the marks their rate is read from: "<job>|rate" holds
-- "<t0> <p0> <t1> <p1> <last>", the job's pages count at two times at least
-- RATE_MARK ms apart (the newer shifts down when it is that old) and the time
-- of its last page, so a reader computes pages/s over the last 30-60 s
-- (spiders_project/keys/jobs.py) with no sample list. Once per job per call:
-- an HGET and an HSET besides the HINCRBY.
for job, count in pairs(paged) do
  local total = redis.call('HINCRBY', KEYS[8], job .. '|pages', count)
  local t0, p0, t1, p1 = string.match(
    redis.call('HGET', KEYS[8], job .. '|rate') or '', '^(%d+) (%d+) (%d+) (%d+)')
  if not t0 then
    t0, p0, t1, p1 = now, total - count, now, total - count
  elseif now - tonumber(t1) >= RATE_MARK then
    t0, p0, t1, p1 = t1, p1, now, total
  end
  redis.call('HSET', KEYS[8], job .. '|rate', string.format('%d %d %d %d %d', t0, p0, t1, p1, now))
end
return ended
