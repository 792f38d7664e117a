#!lua flags=allow-oom
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
--          purged request, not a page (these numbers are the Outcomes of
--          spiders_project/frontier/outcomes.py, mapped there by ack_code)
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
-- that long each time (docs/BENCHMARKS.md). A lease ended without a
-- release (dropped before its download) gives its slot back then; one
-- released earlier does not give it twice.
--
-- Lease ids are unique, so this touches only the caller's own leases: one
-- that expired and was put back (requeue.lua gave its slot back then) has a
-- new id, and a late release or ack of the old one finds nothing.
-- A lease id is "<prefix>/<n>" (lease.lua; the format is built and parsed in
-- spiders_project/frontier/lease_id.py): its prefix names the worker that
-- gave a slot back, for the hand-over below.
--
-- Fair hand-over: a capped host whose slot comes back is ready again at once,
-- and the worker that gave the slot back would take it again on its next call,
-- before any waiting worker looks (they poll every CAP_POLL ms, lease.lua), so
-- one worker would keep the host to itself. When other workers found the host
-- at its cap, the slot is theirs for HANDOVER ms: longer than their poll.
-- Allowed under OOM: it frees more than it writes.
--
-- Reads first, writes last. A call ends the leases of a whole write tick
-- (dozens), and a command a lease would cost Redis more than the script
-- itself; docs/BENCHMARKS.md has the counts, where a version ran 8 commands
-- a lease (a transfer's ZSCORE, SREM, ZSCORE, SADD; an end's ZREM, HGET,
-- HDEL, SREM): 8 of the frontier's 18 commands a page. Now two reads take
-- whether each lease named is held and released (ZMSCORE, SMISMEMBER) and one
-- the infos of the leases it names (HMGET); a host's in-flight count and cap
-- waiters are read when a slot of it first moves (HGET each). The releases,
-- transfers and ends then run one by one, in the same order and by the same
-- rules as before, on those copies, and one write per key puts the result
-- back. So a lease named twice, or a spare whose slot passes on within the
-- same call, ends as it did command by command, and a count that reached 0 is
-- deleted as HINCRBY-then-HDEL did (tests/integration/test_ack_batched.py
-- compares the two on random states). Lua work costs as much as the commands
-- it saves (a table write, a string made, is a fraction of a microsecond like
-- a simple command), so the copies are kept to what the common call needs.
local HANDOVER = 30
local RATE_MARK = 30000
-- Members per command: Lua's unpack puts them on its C stack (8,000 slots).
local CHUNK = 1000
--!include redis_access/lua/clock.lua
--!include job_counts.lua
local now = now_ms(ARGV[1])

local releases = tonumber(ARGV[2])
local transfers = tonumber(ARGV[3 + releases])
local first = 4 + releases
local at = first + 2 * transfers
local pages = tonumber(ARGV[at])

-- `command key list[1..n]`, CHUNK members at a time, after `pre` (a table of
-- arguments or nil); the replies joined in order.
local function each_chunk(command, key, list, pre)
  if #list <= CHUNK and not pre then return redis.call(command, key, unpack(list)) end
  local out = {}
  for s = 1, #list, CHUNK do
    local args = {}
    for _, a in ipairs(pre or {}) do args[#args + 1] = a end
    for k = s, math.min(s + CHUNK - 1, #list) do args[#args + 1] = list[k] end
    local reply = redis.call(command, key, unpack(args))
    if type(reply) == 'table' then
      for _, v in ipairs(reply) do out[#out + 1] = v end
    end
  end
  return out
end

-- Every lease id the call names, once (a lease whose download ended is
-- usually named by its transfer and by its end: ZMSCORE's reply, a formatted
-- double a member, is the dearest read), and the ends.
local named, is_named, ends, items_of = {}, {}, {}, {}
local function name(id)
  if not is_named[id] then
    is_named[id] = true
    named[#named + 1] = id
  end
end
for i = 3, at - 1 do
  if i ~= 3 + releases then name(ARGV[i]) end
end
for k = 1, pages do
  ends[k] = ARGV[at + 2 * k - 1]
  items_of[k] = tonumber(ARGV[at + 2 * k]) or 0
end
for i = at + 2 * pages + 1, #ARGV do ends[#ends + 1] = ARGV[i] end
for _, id in ipairs(ends) do name(id) end
if #named == 0 then return 0 end

local leased, released, was_released = {}, {}, {}
local scores = each_chunk('ZMSCORE', KEYS[1], named)
local members = each_chunk('SMISMEMBER', KEYS[7], named)
for k = 1, #named do
  local id = named[k]
  leased[id] = scores[k] ~= false
  local member = members[k] == 1
  released[id] = member
  was_released[id] = member
end
-- The infos of every lease named, in one read: a release or a transfer
-- needs its host, and the job whose slots it moves.
local info = {}
do
  local infos = each_chunk('HMGET', KEYS[2], named)
  for k = 1, #named do info[named[k]] = infos[k] end
end
local function info_of(id)
  local lease_info = info[id]
  if lease_info == nil then
    lease_info = redis.call('HGET', KEYS[2], id)
    info[id] = lease_info
  end
  return lease_info
end

local function host_of(lease_info)
  if not lease_info then return nil end
  local len, start = string.match(lease_info, '^%S+ (%d+) ()')
  if not len then return nil end
  return string.sub(lease_info, start, start + tonumber(len) - 1)
end

-- Hosts whose slots moved: in-flight count (a number, or false: no field),
-- as read and as it is now, and cap waiters.
local hosts, flight, flight_before, waiting = {}, {}, {}, {}
local function load_host(host)
  if flight_before[host] ~= nil then return end
  local count = redis.call('HGET', KEYS[3], host)
  flight_before[host] = count and (tonumber(count) or 0)
  flight[host] = flight_before[host]
  waiting[host] = redis.call('HGET', KEYS[4], host)
  hosts[#hosts + 1] = host
end
local woken, handover = {}, {}

-- The slots of the job of a lease (its info) change by `by`.
local function job_slots(lease_info, by)
  if not lease_info then return end
  local changes = job_changes(job_of(lease_info))
  changes.slots = (changes.slots or 0) + by
end

local function give_slot_back(id, lease_info)
  if not lease_info or string.sub(id, 1, 1) == '{' then return end  -- previous release: no slot
  local host = host_of(lease_info)
  if not host then return end
  job_slots(lease_info, -1)
  load_host(host)
  local count = (flight[host] or 0) - 1
  flight[host] = count > 0 and count
  local workers = waiting[host]
  if not workers then return end
  waiting[host] = false
  woken[#woken + 1] = host
  local by = string.match(id, '^(.*)/%d+$') or ''
  for worker in string.gmatch(workers, '%S+') do
    if worker ~= by then
      handover[#handover + 1] = host
      handover[#handover + 1] = (now + HANDOVER) .. ' ' .. by
      return
    end
  end
end

local function release(id)
  if leased[id] and not released[id] then
    released[id] = true
    give_slot_back(id, info_of(id))
  end
end

for i = first, at - 1, 2 do
  local from, to = ARGV[i], ARGV[i + 1]
  if leased[to] and released[to] then
    released[to] = false
    job_slots(info_of(to), 1)
    if leased[from] and not released[from] then
      released[from] = true
      job_slots(info_of(from), -1)
    else
      local host = host_of(info_of(to))
      if host then
        load_host(host)
        flight[host] = (flight[host] or 0) + 1
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
local ended_ids = {}
local paged = {}  -- job -> pages this call ended

-- End one lease; items: nil if no page of it was fetched, else its items,
-- or -1: it failed for good (a dead letter), -2: it was refused after its
-- lease (robots.txt), -3: a step dropped it (a blocked host's: purged)
-- (frontier/outcomes.py, ack_code).
local function finish(id, items)
  if not leased[id] then return end
  leased[id] = false
  ended = ended + 1
  ended_ids[ended] = id
  local lease_info = info_of(id)
  if released[id] then
    released[id] = false
  else
    give_slot_back(id, lease_info)
  end
  if not lease_info then return end
  local job = job_of(lease_info)
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

for k = 1, #ends do
  finish(ends[k], items_of[k])  -- nil past the P pages: no page
end

-- The writes: one command per key that changed.
if ended > 0 then
  each_chunk('ZREM', KEYS[1], ended_ids)
  each_chunk('HDEL', KEYS[2], ended_ids)
end
local add, remove = {}, {}
for _, id in ipairs(named) do
  local now_released = released[id]
  if now_released ~= was_released[id] then
    if now_released then add[#add + 1] = id else remove[#remove + 1] = id end
  end
end
if #add > 0 then each_chunk('SADD', KEYS[7], add) end
if #remove > 0 then each_chunk('SREM', KEYS[7], remove) end
if #hosts > 0 then
  local counts, gone = {}, {}
  for _, host in ipairs(hosts) do
    local count = flight[host]
    if count ~= flight_before[host] then
      if count then
        counts[#counts + 1] = host
        counts[#counts + 1] = count
      else
        gone[#gone + 1] = host
      end
    end
  end
  if #counts > 0 then each_chunk('HSET', KEYS[3], counts) end
  if #gone > 0 then each_chunk('HDEL', KEYS[3], gone) end
  if #woken > 0 then
    local ready = {}
    for _, host in ipairs(woken) do
      ready[#ready + 1] = now
      ready[#ready + 1] = host
    end
    each_chunk('HDEL', KEYS[4], woken)
    each_chunk('ZADD', KEYS[5], ready, {'NX'})
  end
  if #handover > 0 then each_chunk('HSET', KEYS[6], handover) end
end

job_counts_done(KEYS[8])
-- Pages, and the marks their rate is read from: "<job>|rate" holds
-- "<t0> <p0> <t1> <p1> <last>", the job's pages count at two times at least
-- RATE_MARK ms apart (the newer shifts down when it is that old) and the time
-- of its last page, so a reader computes pages/s over the last 30-60 s
-- (spiders_project/read_model/job_progress.py) with no sample list. Once per job per call:
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
