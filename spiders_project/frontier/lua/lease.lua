#!lua
-- Lease requests from hosts whose turn has come, and tell the caller which
-- hosts to ask for next time. (The shebang makes Redis refuse the whole call
-- up front under OOM or on a replica: no lease is taken that cannot be recorded.)
--
-- KEYS[1]    hosts: ready-set, host -> time (ms) it may next be fetched
-- KEYS[2]    leases: sorted set of lease ids, score = deadline (ms)
-- KEYS[3]    lease info: hash lease id -> "<queue score> <#host> <host><request>",
--            the score "L" for a request taken from the host's list
-- KEYS[4]    size: counter of queued requests
-- KEYS[5]    host delays: hash host -> delay (ms) the site asked for
-- KEYS[6]    requests:rejected, for a host whose queue is not a sorted set
-- KEYS[7]    in flight: hash host -> its requests leased and not yet downloaded
--            (ack.lua gives slots back when downloads end, requeue.lua too)
-- KEYS[8]    cap waiters: hash host -> workers that found it at its cap; the
--            host is out of the ready-set until a slot comes back
-- KEYS[9]    cap handover: hash host -> "<until ms> <worker>" (ack.lua)
-- KEYS[9+i]  queue of the i-th candidate host
-- KEYS[9+C+i] its retries waiting for their time ("later"; C candidates)
-- KEYS[9+2C+i] its list of new priority-0 requests (enqueue.lua)
-- KEYS[9+3C+i] its jobs set: the requests of jobs other than the default one
--            (job_queues.lua)
-- KEYS[10+4C] released: set of lease ids that hold no slot (ack.lua), spares among them
-- KEYS[11+4C] host limits: hash host -> "<delay ms> <cap>", an operator's overrides
--            (scrapy frontier host; -1 and 0: none), read only while not empty
-- KEYS[12+4C] job counts: hash "<job>|<count>" (job_counts.lua): each request
--            leased moves from queued to leased (and holds a slot, but a spare),
--            each due retry from later to queued
-- KEYS[13+4C] job control: hash job -> "paused" or "cancelled" (scrapy jobs pause|cancel),
--            read only while not empty (job_turns.lua)
-- KEYS[14+4C] held: sorted set of the requests of paused jobs set aside, members
--            "<job> <queue score> <#host> <host><request>", all scored 0 (so a job's
--            are one ZRANGEBYLEX), put back by jobs/lua/restore_held.lua on resume
-- KEYS[15+4C] job turns: hash host -> the job its last lease served, for the
--            hosts whose jobs take turns (job_turns.lua)
-- KEYS[15+4C+j] the j-th hash whose field ARGV[8+4C+j] the reply carries, read
--            after the leases (R of them, maybe none): a shared cookie jar's
--            version, so that its requests need no read of their own
--            (frontier/context.LeaseRead, cookies/store.py)
-- ARGV[1]    now, in ms since the epoch, or "" for Redis' own clock (TIME): production
--            always passes "" (one clock for every node); tests pass a time to step it
-- ARGV[2]    N, the most requests to lease
-- ARGV[3]    lease duration (ms)
-- ARGV[4]    how many ready hosts to return as next candidates
-- ARGV[5]    the most requests of one host leased at once, by the whole
--            cluster (CONCURRENT_REQUESTS_PER_DOMAIN), unless host limits say
-- ARGV[6]    the caller's prefix: lease ids are "<prefix>/<n>", and a worker is named by
--            its prefix (cap waiters, handover). The format ("<owner>[@<shard>][+<lane>]")
--            is built and parsed in spiders_project/frontier/lease_id.py, and only there
-- ARGV[7]    n of the first lease id; the caller never reuses n (not even
--            after a call whose reply was lost), so every lease id is unique
-- ARGV[8]    C, the number of candidates
-- ARGV[9..]  (host, configured delay in ms, spares, holds) for candidate i = 1..C:
--            spares, the most spare leases the caller may take of that host
--            (below); holds, "1" if the caller holds slots of it, else "0"
--            (spares then only with slots this call gives)
-- ARGV[8+4C+j] the field of the j-th hash read (above), j = 1..R
-- Returns    {{lease id, request, host, ...}, {next candidate host, ...},
--             ms until a host is ready (at most CAP_POLL while a host is at its cap) or -1,
--             {host that gave requests and is now at its cap, ...},
--             {lease id that holds no slot (a spare), ...},
--             {host found at its cap, other workers waiting for it, ...},
--             {the j-th hash's field (false if none), ...}}
--
-- Spares: a worker 10 ms from Redis would leave each slot of a capped host
-- empty for two round trips (release, then lease again), a large share of
-- its pages/s (docs/BENCHMARKS.md, Distance). So a worker
-- that holds slots of a host without delay (holds), or takes its last free
-- ones in this call, may lease up to "spares" more of its requests once it
-- is at its cap: leased
-- (renewed, acked, put back like any lease) but holding no slot (they are
-- in "released" from the start, so neither ack.lua nor requeue.lua gives a
-- slot back for them). When one of its downloads of that host ends, the
-- worker passes the slot to a spare on the spot (ack.lua's transfers), so the
-- host's downloads in flight, cluster-wide, never exceed the cap. A worker
-- that finds the host at its cap is still noted as waiting, and told how many
-- other workers wait, so it keeps no more than its share of the slots
-- (frontier/spares.py).
--
-- A lease id names one lease of one worker: ack (ack.lua), renew and
-- hand-back act on ids, so a worker can only ever touch its own leases. Once
-- an expired lease is put back and leased again, it has a new id, and the old
-- holder's late ack or renew finds nothing.
--
-- A host at its cap (ARGV[5] requests leased and not yet downloaded, by all
-- workers together) gives nothing and leaves the ready-set; the caller is
-- noted as waiting for it. A slot comes back when a download ends (ack.lua),
-- or with its lease (requeue.lua; a dead worker's when its leases expire).
-- The caller is told which hosts it filled to their cap, so it sends the
-- release of those leases at once rather than at its next write tick; a slot
-- that others waited for is handed over to them first (ack.lua), and the
-- worker that gave it back does not see the host until then. Waiting workers
-- are not told: every idle worker looks again within CAP_POLL ms.
--
-- A host gives, in this order: its sorted set's requests of priority above
-- 0 (score < 0), its list (first in, first out), then the rest of its sorted
-- set (priority 0 seeds and never-filtered requests, by age; then lower
-- priorities, retries among them). Those are the default job's; a host with
-- requests of other jobs gives one request a job in turn (job_turns.lua).
--
-- Retries whose time has come move from the host's later set into its queue,
-- at their old place, before it gives requests; a host whose queue is empty
-- but whose later set is not stays in the ready-set, at the time its first
-- retry is due.
--
-- A host with a delay gives one request per call and moves its time forward
-- by the delay (the larger of the configured one and the site's own), so the
-- whole cluster fetches from it no faster than that. A host without delay
-- gives up to ARGV[5]. A host that gave requests goes to the back of the
-- ready-set (its time becomes now, or now + delay), so hosts take turns and a
-- seed with a large site never starves the others. Candidates are re-checked
-- here, so several workers asking for the same hosts at once never get the
-- same turn.
--
-- An operator's override of a host's delay replaces the configured one (the
-- site's own still applies if larger), and its cap replaces ARGV[5], from the
-- next call on: read here, not from the caller, so a spare candidate (sent
-- with delay 0) or a worker that has not yet seen the override obeys it too.
-- The hash is empty in most crawls: one HLEN a call, and one HGET a
-- candidate only while some host is overridden.
--
-- Jobs paused or cancelled: their requests are set aside or dropped as they
-- come up, and the host gives the next request in their place (job_turns.lua).
local CAP_POLL = 20
--!include redis_access/lua/clock.lua
--!include job_turns.lua
local now = now_ms(ARGV[1])
local want = tonumber(ARGV[2])
local deadline = now + tonumber(ARGV[3])
local deadline_s = string.format('%d', deadline)
local default_cap = tonumber(ARGV[5])
local owner = ARGV[6]
local n = tonumber(ARGV[7])
local leased = {}
local full = {}

-- ms until a host whose freed slot is handed over to other workers is the
-- caller's to take too, or nil if the caller may take it now.
local function handed_away(host)
  local hand = redis.call('HGET', KEYS[9], host)
  if not hand then return nil end
  local till, by = string.match(hand, '^(%d+) (.*)$')
  if till and tonumber(till) > now then
    if by == owner then return tonumber(till) - now end
    return nil
  end
  redis.call('HDEL', KEYS[9], host)
  return nil
end

local ncand = tonumber(ARGV[8])
take_init(KEYS[13 + 4 * ncand], KEYS[14 + 4 * ncand], KEYS[15 + 4 * ncand])

local spares = {}
local contest = {}

-- Other workers noted as waiting for a host at its cap.
local function others_waiting(host)
  local count = 0
  for worker in string.gmatch(redis.call('HGET', KEYS[8], host) or '', '%S+') do
    if worker ~= owner then count = count + 1 end
  end
  return count
end

local limits = KEYS[11 + 4 * ncand]
local steered = redis.call('HLEN', limits) > 0

-- The cap of a host and the delay to use instead of the caller's (or nil).
local function limits_of(host)
  if not steered then return default_cap, nil end
  local set = redis.call('HGET', limits, host)
  local delay, cap = string.match(set or '', '^(%-?%d+) (%d+)$')
  delay, cap = tonumber(delay), tonumber(cap)
  if delay and delay < 0 then delay = nil end
  if not cap or cap < 1 then cap = default_cap end
  return cap, delay
end
-- `command key` with the members of `list`, at most 1,000 at once (Lua's
-- unpack puts them on its C stack; 1,000 is even, so pairs stay whole).
local function write_all(command, key, list)
  for s = 1, #list, 1000 do
    redis.call(command, key, unpack(list, s, math.min(s + 999, #list)))
  end
end

-- Lease popped {request, queue score, ...} entries of a host; spares are put
-- in "released" from the start, as holding no slot. The host's leases are
-- written together, right after their pop (one ZADD, one HSET, one SADD and
-- one DECRBY a host, not commands a lease): nothing
-- runs between taking requests from a queue and recording their leases, so a
-- script that fails later (Redis keeps what a script wrote before its error)
-- leaves them leased, to come back when the leases expire, never lost.
local function lease_all(host, popped, spare)
  if #popped == 0 then return 0 end
  local scores, infos, spare_ids = {}, {}, {}
  -- Numbers made strings once a host, not once a lease (each a sprintf).
  local tail = ' ' .. #host .. ' ' .. host
  local mark = owner .. '/'
  for j = 1, #popped, 2 do
    local id = mark .. n
    n = n + 1
    scores[#scores + 1] = deadline_s
    scores[#scores + 1] = id
    infos[#infos + 1] = id
    infos[#infos + 1] = popped[j + 1] .. tail .. popped[j]
    leased[#leased + 1] = id
    leased[#leased + 1] = popped[j]
    leased[#leased + 1] = host
    local changes = job_changes(job_of(popped[j]))
    changes.queued = (changes.queued or 0) - 1
    changes.leased = (changes.leased or 0) + 1
    if spare then
      spare_ids[#spare_ids + 1] = id
      spares[#spares + 1] = id
    else
      changes.slots = (changes.slots or 0) + 1
    end
  end
  write_all('ZADD', KEYS[2], scores)
  write_all('HSET', KEYS[3], infos)
  if spare then write_all('SADD', KEYS[10 + 4 * ncand], spare_ids) end
  redis.call('DECRBY', KEYS[4], #popped / 2)
  return #popped / 2
end

for i = 1, ncand do
  local host = ARGV[5 + i * 4]
  local spare = tonumber(ARGV[7 + i * 4])
  local holds = ARGV[8 + i * 4] == '1'
  local cap, set_delay = limits_of(host)
  local ready = want > 0 and redis.call('ZSCORE', KEYS[1], host)
  local turn = ready and tonumber(ready) <= now and not handed_away(host)
  local busy = tonumber(redis.call('HGET', KEYS[7], host) or '0')
  if turn or (spare > 0 and holds and busy >= cap) then
    local queue = KEYS[9 + i]
    local later = KEYS[9 + ncand + i]
    local list = KEYS[9 + 2 * ncand + i]
    local jobs = KEYS[9 + 3 * ncand + i]
    local due = redis.call('ZRANGEBYSCORE', later, '-inf', now, 'LIMIT', 0, 1000)
    if #due > 0 then
      for _, entry in ipairs(due) do
        local score, start = string.match(entry, '^(%S+) ()')
        if score then
          local request = string.sub(entry, start)
          local job = job_of(request)
          local changes = job_changes(job)
          if queue_job_request(queue, jobs, KEYS[15 + 4 * ncand], host, job, tonumber(score),
              request) == 1 then
            changes.queued = (changes.queued or 0) + 1
          end
          if job ~= 'default' then taking.turned = true end  -- its host is in the turns now
          changes.later = (changes.later or 0) - 1
        end
      end
      redis.call('ZREM', later, unpack(due))
    end
    local delay = set_delay or tonumber(ARGV[6 + i * 4])
    local asked = tonumber(redis.call('HGET', KEYS[5], host) or '0')
    if asked > delay then delay = asked end
    local take = math.min(want, cap - busy)
    if delay > 0 then take = math.min(take, 1) end
    local got = 0
    local err
    if busy >= cap then
      -- Out of the ready-set, but for a holder that may take spares: those
      -- bring the host back (below), no later than it was due, so that its
      -- own calls (one a slot passed, faster than CAP_POLL at 10 ms from
      -- Redis) never push back the time at which the others find it capped
      -- and wait for their share.
      if not (holds and spare > 0 and delay == 0) then redis.call('ZREM', KEYS[1], host) end
      local waiting = redis.call('HGET', KEYS[8], host)
      if not waiting then
        redis.call('HSET', KEYS[8], host, owner)
      elseif not string.find(' ' .. waiting .. ' ', ' ' .. owner .. ' ', 1, true) then
        redis.call('HSET', KEYS[8], host, waiting .. ' ' .. owner)
      end
    elseif turn and take > 0 then
      local popped
      local set_aside = taking.diverted
      popped, err = take_requests(host, queue, list, jobs, take)
      set_aside = taking.diverted - set_aside
      if err then
        -- Not a sorted set or not a list (planted or corrupted): set the host
        -- aside, so it harms only itself, and serve the others.
        redis.call('LPUSH', KEYS[6], 'host ' .. host .. ': ' .. err)
        redis.call('ZREM', KEYS[1], host)
      end
      got = lease_all(host, popped, false)
      want = want - got
      if got > 0 then
        redis.call('HINCRBY', KEYS[7], host, got)
        redis.call('HDEL', KEYS[9], host)  -- handed over: done
        if busy + got >= cap then full[#full + 1] = host end
      end
      if err then
        -- Set aside above: out of the ready-set for good.
      elseif got > 0 and (delay > 0 or redis.call('EXISTS', queue, list, jobs) > 0) then
        redis.call('ZADD', KEYS[1], now + delay, host)
      elseif set_aside > 0 and redis.call('EXISTS', queue, list, jobs) > 0 then
        -- Only a paused or cancelled job's requests came out: no fetch, the turn stays.
        redis.call('ZADD', KEYS[1], now, host)
      else
        local waiting = redis.call('ZRANGE', later, 0, 0, 'WITHSCORES')
        if #waiting > 0 then
          redis.call('ZADD', KEYS[1], math.max(tonumber(waiting[2]), now + delay), host)
        else
          -- Nothing left in its queue and no turn to keep: forget the host, and
          -- the delay it asked for (workers that know it store it again, gate.lua).
          redis.call('ZREM', KEYS[1], host)
          redis.call('HDEL', KEYS[5], host)
        end
      end
    end
    if not err and spare > 0 and delay == 0 and busy + got >= cap and (holds or got > 0) then
      -- At its cap, and the caller holds slots of it or took its last free
      -- ones: spares (the header). Its slots may now pass from download to
      -- download without coming back, so the host goes back in the ready-set
      -- in CAP_POLL ms, where a worker with none finds it at its cap and waits
      -- for it (the holders then keep only their share).
      local popped, spare_err = take_requests(host, queue, list, jobs, spare)
      lease_all(host, popped, true)
      if spare_err then
        redis.call('LPUSH', KEYS[6], 'host ' .. host .. ': ' .. spare_err)
      elseif got == 0 then
        if redis.call('EXISTS', queue, list, jobs) > 0 then
          -- LT: in CAP_POLL ms at the latest; a time already nearer stays.
          redis.call('ZADD', KEYS[1], 'LT', now + CAP_POLL, host)
        else
          redis.call('ZREM', KEYS[1], host)
        end
      end
      contest[#contest + 1] = host
      contest[#contest + 1] = others_waiting(host)
    end
  end
end
local ready_hosts = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
local next_hosts = ready_hosts
local held = -1  -- ms until the first host handed away from the caller is its to take
if redis.call('HLEN', KEYS[9]) > 0 then
  next_hosts = {}
  for _, host in ipairs(ready_hosts) do
    local left = handed_away(host)
    if not left then
      next_hosts[#next_hosts + 1] = host
    elseif held < 0 or left < held then
      held = left
    end
  end
end
local wait = -1
if #next_hosts == 0 then
  if held >= 0 then
    wait = held
  else
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    if #first > 0 then wait = tonumber(first[2]) - now end
  end
  -- A capped host is ready again as soon as one of its slots comes back
  -- (ack.lua), which waiting workers are not told: every worker with nothing
  -- to do looks again within CAP_POLL ms.
  if (wait < 0 or wait > CAP_POLL) and redis.call('HLEN', KEYS[8]) > 0 then wait = CAP_POLL end
end
if taking.diverted > 0 then redis.call('DECRBY', KEYS[4], taking.diverted) end
job_counts_done(KEYS[12 + 4 * ncand])
-- The hashes read for the caller, after every lease of this call.
local fields = {}
for j = 1, #KEYS - 15 - 4 * ncand do
  fields[j] = redis.call('HGET', KEYS[15 + 4 * ncand + j], ARGV[8 + 4 * ncand + j])
end
return {leased, next_hosts, wait, full, spares, contest, fields}
