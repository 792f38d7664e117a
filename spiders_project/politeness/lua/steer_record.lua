#!lua flags=allow-oom
-- Change an operator's steering record of one host field by field, in one
-- step: two operators steering one host at once each keep the other's change
-- (a read in the command, then a write, would lose one of them).
--
-- KEYS[1]  host steering: hash host -> JSON {"delay", "cap", "blocked"}
--          (host_steering.py; every worker reads it each second)
-- ARGV[1]  the host
-- ARGV[2]  its delay in seconds, "" to keep the record's, "default" for none
-- ARGV[3]  its cap, "" to keep the record's, "default" for none
-- ARGV[4]  "1" blocked, "0" not, "" to keep the record's
-- Returns  {the record before, the record now}, "" for none (a record left
--          with nothing set is deleted). A field of the wrong type in the old
--          record counts as not set: the record is the workers' input.
local host = ARGV[1]
local before = redis.call('HGET', KEYS[1], host) or ''
local ok, old = pcall(cjson.decode, before)
if not ok or type(old) ~= 'table' then old = {} end
local function field(given, current, want_type)
  if given == 'default' then return nil end
  if given ~= '' then return tonumber(given) end
  if type(current) == want_type then return current end
  return nil
end
local rec = {}
rec.delay = field(ARGV[2], old.delay, 'number')
rec.cap = field(ARGV[3], old.cap, 'number')
if ARGV[4] == '1' or (ARGV[4] == '' and old.blocked == true) then rec.blocked = true end
if next(rec) == nil then
  redis.call('HDEL', KEYS[1], host)
  return {before, ''}
end
local now = cjson.encode(rec)
redis.call('HSET', KEYS[1], host, now)
return {before, now}
