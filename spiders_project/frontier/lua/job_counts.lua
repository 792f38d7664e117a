-- Counts of requests per crawl job, kept by the scripts that move requests
-- between a shard's queues and leases: one hash per frontier shard (Redis
-- Cluster: a script touches one slot), fields "<job>|queued" (in a host's
-- queue, list or jobs set), "<job>|later" (a retry backing off),
-- "<job>|leased" (leased by a worker, whatever it does with it),
-- "<job>|slots" (those of its leases that hold one of their host's download
-- slots: lease.lua gives one with every lease but a spare, ack.lua takes it
-- back when the download ends or passes it to a spare, requeue.lua with the
-- lease), "<job>|acked" (leases ended for good), "<job>|pages" (those of them
-- whose response reached the spider: ack.lua), "<job>|items" (scraped from
-- those pages), "<job>|dead_letters" (leases whose request failed for good),
-- "<job>|refused" (refused after the lease: robots.txt) and "<job>|purged"
-- (dropped from a host's queue by an operator: politeness/lua/steer_host.lua,
-- jobs/lua/purge_job.lua; or, leased, dropped by a step, a blocked host's:
-- ack.lua). Readers sum the shards (spiders_project/read_model/job_progress.py).
-- Bounded: eleven fields a job, no per-URL key.
--
-- A request's job is its meta's "crawl_job" (meta.JOB), read with plain finds,
-- no JSON decode and no pattern on the way most requests take.
-- serialize.dumps writes the URL first and, for a request with a job, the
-- meta right after it with the job first: '{"u":"<url>","m":{"crawl_job":"'.
-- Nothing before it can hold ',"m":{"crawl_job":"' (a URL holds no '"':
-- Scrapy percent-encodes it), so the first one is the job's; a "crawl_job"
-- inside a string is escaped (\"), and one in a nested dict or a cookie comes
-- after the job's. Absent, or not a job id: the job "default" (a request
-- without a job whose meta nests {"m": {"crawl_job": ...}} would count for
-- that one). Entries with a prefix (a lease's info, a held or a waiting
-- request) are read the same way. The last job's whole key is tried where
-- the key was found, so the requests of one job make no new string: a
-- cost paid for every request (docs/BENCHMARKS.md has its measure).
-- Changes add up in a table and go out as one HINCRBY per field per call,
-- never one per request, which would multiply Redis' CPU per page.
local job_delta = {}  -- job -> {count -> change}
local job_order = {}  -- the jobs changed, in order
local JOB_KEY = ',"m":{"crawl_job":"'
local last_job, last_key = nil, nil  -- the job read last, and its key with its closing quote

local function job_of(request)
  local at = string.find(request, JOB_KEY, 1, true)
  if not at then return 'default' end
  if last_key and string.find(request, last_key, at, true) == at then return last_job end
  local stop = string.find(request, '"', at + 19, true)
  local job = stop and string.sub(request, at + 19, stop - 1) or ''
  if not string.find(job, '^[%w%.%-_]+$') then return 'default' end
  last_job, last_key = job, JOB_KEY .. job .. '"'
  return job
end

-- The changes of `job`'s counts in this call (a table count -> change):
-- callers that change several counts of one request find its job once.
local function job_changes(job)
  local changes = job_delta[job]
  if not changes then
    changes = {}
    job_delta[job] = changes
    job_order[#job_order + 1] = job
  end
  return changes
end

-- Add `by` to the job of `request`'s count `what` (queued, later, leased, acked, ...).
local function job_count(request, what, by)
  local changes = job_changes(job_of(request))
  changes[what] = (changes[what] or 0) + by
end

-- Write the changes to the hash `key`: one HINCRBY per field that changed.
-- A job's slots never go below 0: leases a worker took before slots were
-- counted give theirs back uncounted, and the count must not stay short.
local function job_counts_done(key)
  for _, job in ipairs(job_order) do
    for what, by in pairs(job_delta[job]) do
      if by ~= 0 then
        local field = job .. '|' .. what
        if redis.call('HINCRBY', key, field, by) < 0 and what == 'slots' then
          redis.call('HSET', key, field, 0)
        end
      end
    end
  end
  job_delta = {}
  job_order = {}
end
