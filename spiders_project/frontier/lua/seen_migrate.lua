-- Move fingerprints of the previous release's set into the seen-set, each
-- in the same atomic step as its removal there, so a worker reading both
-- (seen.lua) never finds it in neither: ``scrapy dupefilter migrate``.
--
-- KEYS[1]  seen: the seen-set's counter, and the prefix of its keys (seen.lua)
-- KEYS[2]  dupefilter: the previous release's set of hex fingerprints
-- ARGV[1]  the seen-set's mode (seen.lua)
-- ARGV[2..] pairs (token without hex, member of the old set as stored)
-- Returns  {moved, new}: members removed from the old set, and of them those
--          not in the seen-set yet
--!include redis_access/lua/clock.lua
--!include seen.lua
seen_init(KEYS[1], KEYS[2], ARGV[1], now_ms(nil))
local moved = 0
for i = 2, #ARGV, 2 do
  if redis.call('SREM', KEYS[2], ARGV[i + 1]) == 1 then
    moved = moved + 1
    seen_add(ARGV[i])
  end
end
seen_done()
return {moved, seen_added}
