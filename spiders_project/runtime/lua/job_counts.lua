-- Counts of requests per crawl job, kept by the scripts that move requests
-- between a shard's queues and leases: one hash per frontier shard (Redis
-- Cluster: a script touches one slot), fields "<job>|queued" (in a host's
-- queue or list), "<job>|later" (a retry backing off), "<job>|leased" (in
-- flight), "<job>|acked" (leases ended for good), "<job>|pages" (those of
-- them whose response reached the spider: ack.lua), "<job>|items" (scraped
-- from those pages), "<job>|dead_letters" (leases whose request failed for
-- good), "<job>|refused" (refused after the lease: robots.txt) and
-- "<job>|purged" (dropped
-- from a host's queue by an operator: politeness/lua/steer_host.lua; or,
-- leased, dropped by a step, a blocked host's: ack.lua). Readers
-- sum the shards (spiders_project/job_keys.py). Bounded: ten fields a job,
-- no per-URL key.
--
-- A request's job is its meta's "crawl_job" (meta.JOB), found with one plain
-- find, no JSON decode: serialize.dumps writes the meta right after the URL
-- and the job first in it, and any "crawl_job" inside a string is escaped
-- (\"), so the first match is the job's. Absent: the job "default".
-- Changes add up in a table and go out as one HINCRBY per field per call,
-- never one per request (Redis CPU per page: issue 29).
local job_delta = {}  -- job -> {count -> change}
local job_order = {}  -- the jobs changed, in order

local function job_of(request)
  local at = string.find(request, '"crawl_job":"', 1, true)
  if not at then return 'default' end
  return string.match(request, '^([%w%.%-_]+)"', at + 13) or 'default'
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
local function job_counts_done(key)
  for _, job in ipairs(job_order) do
    for what, by in pairs(job_delta[job]) do
      if by ~= 0 then redis.call('HINCRBY', key, job .. '|' .. what, by) end
    end
  end
  job_delta = {}
  job_order = {}
end
