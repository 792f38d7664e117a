#!lua flags=allow-oom
-- List leases whose deadline has passed (their worker died or stalled), with
-- their hosts, so the caller can name those hosts' queues in KEYS of
-- requeue.lua, which re-checks each deadline as it moves the lease.
--
-- A lease that cannot be put back (its info is missing or unreadable) is
-- ended here instead: removed, and its id (with its info, if any) pushed to
-- requests:rejected for an operator, so it never blocks the idle check.
-- Allowed under OOM: it only removes, or moves a little.
--
-- KEYS[1]  leases: sorted set of lease ids, score = deadline (ms)
-- KEYS[2]  lease info: hash lease id -> "<queue score> <#host> <host><request>"
-- KEYS[3]  requests:rejected: list of entries set aside
-- KEYS[4]  released: set of lease ids whose cap slot was given back (ack.lua)
-- KEYS[5]  job counts: hash "<job>|<count>" (job_counts.lua): a lease ended
--          here leaves its job's leased count, and its slots if it held one
--          (when its info names the job: without info, its job is unknown and
--          the counts stay)
-- ARGV[1]  now, in ms since the epoch, or "" for Redis' own clock (TIME): production
--          always passes "" (one clock for every node); tests pass a time to step it
-- ARGV[2]  the most leases to list
-- Returns  {{lease id, host, lease id, host, ...}, {rejected lease id, ...}}
--
-- Leases written by the previous release (member = the request, info =
-- "<score> <host>") are listed the same way; requeue.lua reads both forms.
--!include redis_access/lua/clock.lua
--!include job_counts.lua
local now = now_ms(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
local rejected = {}
for _, id in ipairs(ids) do
  local info = redis.call('HGET', KEYS[2], id)
  local host = nil
  if info then
    if string.sub(id, 1, 1) == '{' then
      host = string.match(info, '^%S+ (.*)$')
    else
      local len, start = string.match(info, '^%S+ (%d+) ()')
      if len then host = string.sub(info, start, start + tonumber(len) - 1) end
    end
  end
  if host then
    out[#out + 1] = id
    out[#out + 1] = host
  else
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
    local released = redis.call('SREM', KEYS[4], id) == 1
    if info then
      job_count(info, 'leased', -1)
      if not released then job_count(info, 'slots', -1) end
    end
    redis.call('LPUSH', KEYS[3], 'lease ' .. id .. ' without lease info: ' .. (info or '(none)'))
    rejected[#rejected + 1] = id
  end
end
job_counts_done(KEYS[5])
return {out, rejected}
