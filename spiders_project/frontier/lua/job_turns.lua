-- Taking a host's requests as crawl jobs need it (lease.lua): the jobs on one
-- host take turns, and the requests of paused and cancelled jobs never leave.
-- Touches only the keys lease.lua gives (take_init).
--
-- Turns: a host whose jobs set holds requests of jobs other than the default
-- one (job_queues.lua) gives one request a job in turn: the default job's
-- (from its sorted set and list, in their order), then each other job's in
-- the order of their ids, then the default job's again. A job with nothing
-- queued is skipped. The job served last is kept in the turns hash (host ->
-- job, "" for the default job), so turns go on from one call, and one
-- worker, to the next: two jobs queued on a host get every other request,
-- whichever came first, while priorities still order each job's own. A turn
-- costs one or two O(log N) reads of the jobs set (its next job's first
-- member), never a scan of the host's queue. A host with one job left gives
-- the rest of its take from that job in one range. In a crawl without jobs
-- the turns hash is empty: one HLEN a call.
--
-- Paused and cancelled jobs: while the job control hash is not empty, each
-- request taken is checked against it (one HGET per job a call). A paused
-- job's request is set aside in the held set, still queued for its job but
-- out of the host's queue and out of size, so the host's turns and slots go
-- to the other jobs at full speed; a cancelled job's is dropped, counted
-- purged. Either way the host gives the next request in its place (at most 8
-- rounds a call); in a jobs set, a job's turn sets aside or drops up to
-- DIVERT of its requests at once. Empty in most crawls: one HLEN a call.
--!include job_queues.lua
--!include host_queues.lua
local DIVERT = 100
local taking = {diverted = 0}  -- requests taken from a queue and set aside or dropped (out of size)

-- The keys: job control, held set and turns hash of the lane.
local function take_init(control, held, turns)
  taking.control, taking.held, taking.turns = control, held, turns
  taking.controlled = redis.call('HLEN', control) > 0
  taking.turned = redis.call('HLEN', turns) > 0
  taking.states = {}
end

-- A job's control state: 'paused', 'cancelled' or false.
local function job_state(job)
  if not taking.controlled then return false end
  local state = taking.states[job]
  if state == nil then
    state = redis.call('HGET', taking.control, job) or false
    taking.states[job] = state
  end
  return state
end

-- Set aside (paused) or drop (cancelled) a request taken from `host`.
local function divert(host, job, state, score, request)
  if state == 'paused' then
    redis.call('ZADD', taking.held, 0, job .. ' ' .. score .. ' ' .. #host .. ' ' .. host .. request)
  else
    local changes = job_changes(job)
    changes.queued = (changes.queued or 0) - 1
    changes.purged = (changes.purged or 0) + 1
  end
  taking.diverted = taking.diverted + 1
end

-- take_from, with the requests of paused jobs set aside and those of
-- cancelled jobs dropped, each replaced by the next one.
local function take_default(host, queue, list, n)
  if not taking.controlled then return take_from(queue, list, n) end
  local out, err = {}, nil
  for _ = 1, 8 do
    local got
    got, err = take_from(queue, list, n)
    local kept = 0
    for j = 1, #got, 2 do
      local job = job_of(got[j])
      local state = job_state(job)
      if state then
        divert(host, job, state, got[j + 1], got[j])
      else
        out[#out + 1] = got[j]
        out[#out + 1] = got[j + 1]
        kept = kept + 1
      end
    end
    n = n - kept
    if err or n <= 0 or kept * 2 == #got then break end
  end
  return out, err
end

-- The first member of a jobs set from `from` (a ZRANGEBYLEX bound) on, or
-- nil; and the error of a key of the wrong type.
local function first_member(jobs, from)
  local reply = redis.pcall('ZRANGEBYLEX', jobs, from, '+', 'LIMIT', 0, 1)
  if reply.err then return nil, reply.err end
  return reply[1], nil
end

-- Up to n members of `job` in a jobs set, taken out: {request, score, ...}
-- appended to `out`; or, for a paused or cancelled job, up to DIVERT of them
-- set aside or dropped. Returns how many went to `out`.
local function take_job(host, jobs, job, n, out)
  local state = job_state(job)
  local members = redis.call(
    'ZRANGEBYLEX', jobs, '[' .. job .. ' ', '(' .. job .. '!', 'LIMIT', 0, state and DIVERT or n)
  if #members == 0 then return 0 end
  redis.call('ZREM', jobs, unpack(members))
  for _, member in ipairs(members) do
    local _, score, request = job_member_parts(member)
    if state then
      divert(host, job, state, score, request)
    else
      out[#out + 1] = request
      out[#out + 1] = score
    end
  end
  return state and 0 or #members
end

-- Up to n requests of a host whose jobs take turns (the header), as
-- take_from gives them, and the error of a key of the wrong type.
local function take_turns(host, queue, list, jobs, last, n)
  local out, err = {}, nil
  local default_left = true  -- whether the default job's queues may still give
  for _ = 1, n + 8 do
    if n <= 0 then break end
    local member
    if last ~= '' then
      member, err = first_member(jobs, '(' .. last .. '!')
      if err then break end
    end
    if not member and last ~= '' and default_left then
      -- Past the last job: the default job's turn.
      local got
      got, err = take_default(host, queue, list, 1)
      if err then break end
      if #got > 0 then
        out[#out + 1] = got[1]
        out[#out + 1] = got[2]
        n = n - 1
        last = ''
      else
        default_left = false
      end
    else
      if not member then
        member, err = first_member(jobs, '-')
        if err then break end
      end
      if not member then
        -- No other job has requests left: the default job's, all at once.
        if default_left then
          local got
          got, err = take_default(host, queue, list, n)
          for j = 1, #got do out[#out + 1] = got[j] end
        end
        last = ''
        break
      end
      local job = string.sub(member, 1, string.find(member, ' ', 1, true) - 1)
      -- One request, or the whole take from a job that is the only one left.
      local alone = job == last and not default_left
      n = n - take_job(host, jobs, job, alone and n or 1, out)
      last = job
    end
  end
  if err then return out, err end
  if redis.call('EXISTS', jobs) == 0 then
    redis.call('HDEL', taking.turns, host)  -- no other job left here: the default job alone
  else
    redis.call('HSET', taking.turns, host, last)
  end
  return out, nil
end

-- Up to n requests of a host: in turns while it has other jobs' requests.
local function take_requests(host, queue, list, jobs, n)
  local last = taking.turned and redis.call('HGET', taking.turns, host)
  if not last then return take_default(host, queue, list, n) end
  return take_turns(host, queue, list, jobs, last, n)
end
