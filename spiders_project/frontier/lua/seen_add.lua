-- Record fingerprints in the seen-set, outside the enqueue script: for
-- FingerprintDupeFilter.request_seen (a scheduler other than ours) and tests.
--
-- KEYS[1]  seen: the seen-set's counter, and the prefix of its keys (seen.lua)
-- KEYS[2]  dupefilter: the previous release's set of hex fingerprints
-- ARGV[1]  the seen-set's mode (seen.lua)
-- ARGV[2..] tokens (seen.lua)
-- Returns  {1 if the i-th token was new, else 0, ...}
--!include redis_access/lua/clock.lua
--!include seen.lua
seen_init(KEYS[1], KEYS[2], ARGV[1], now_ms(nil))
local out = {}
for i = 2, #ARGV do
  out[#out + 1] = seen_add(ARGV[i]) and 1 or 0
end
seen_done()
return out
