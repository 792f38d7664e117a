-- Deduplicate and enqueue a batch of requests in one round trip.
--
-- KEYS[1]  dupefilter: set of request fingerprints
-- KEYS[2]  queue: sorted set of JSON requests, lowest score first
-- KEYS[3]  seq: counter that keeps first-in first-out order within a priority
-- ARGV     triples of (fingerprint, priority, payload):
--            fingerprint ""       never filtered, fingerprint not recorded
--            fingerprint "!<fp>"  recorded, but enqueued even if seen (seeds)
--            fingerprint "<fp>"   enqueued only if not seen before
--          priority is an integer in [-4000, 4000]; higher pops first.
-- Returns  the number of requests enqueued.
--
-- Score = -priority * 2^40 + seq stays an exact integer in a double.
local enqueued = 0
local n = #ARGV / 3
if n == 0 then return 0 end
local seq = redis.call('INCRBY', KEYS[3], n) - n
for i = 0, n - 1 do
  local fp = ARGV[i * 3 + 1]
  local add = true
  if fp ~= '' then
    if string.sub(fp, 1, 1) == '!' then
      redis.call('SADD', KEYS[1], string.sub(fp, 2))
    else
      add = redis.call('SADD', KEYS[1], fp) == 1
    end
  end
  if add then
    seq = seq + 1
    local score = -tonumber(ARGV[i * 3 + 2]) * 1099511627776 + seq
    redis.call('ZADD', KEYS[2], score, ARGV[i * 3 + 3])
    enqueued = enqueued + 1
  end
end
return enqueued
