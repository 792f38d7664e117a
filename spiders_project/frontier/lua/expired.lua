-- List leases whose deadline has passed (their worker died), with their hosts,
-- so the caller can name those hosts' queues in KEYS of requeue.lua.
--
-- KEYS[1]  leases: sorted set of leased JSON requests, score = deadline (ms)
-- KEYS[2]  lease info: hash leased request -> "<queue score> <host>"
-- ARGV[1]  the most leases to list
-- Returns  {request, host, request, host, ...}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local out = {}
for _, m in ipairs(members) do
  local info = redis.call('HGET', KEYS[2], m) or ''
  out[#out + 1] = m
  out[#out + 1] = string.match(info, ' (.*)$') or ''
end
return out
