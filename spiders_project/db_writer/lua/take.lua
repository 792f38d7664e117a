#!lua flags=allow-oom
-- Allowed under OOM: it moves entries between two lists, so memory stays level
-- (the db_writer must drain a Redis that is full).
--
-- Move up to N entries from the head of the item buffer to the tail of the
-- processing list, for the db_writer that holds the lock.
--
-- Producers RPUSH to the tail of the buffer, so taking from the head keeps
-- items first in, first out; appending to the processing list keeps it in the
-- same order, so the batch in hand is always its first entries.
--
-- KEYS[1]  item buffer: list of JSON items (<spider>:items)
-- KEYS[2]  processing list: entries taken and not yet committed
-- KEYS[3]  db_writer lock: holds the token of the one writer allowed to take
-- ARGV[1]  this writer's lock token
-- ARGV[2]  N, the most entries to move
-- Returns  the moved entries, oldest first (possibly none), or false, moving
--          nothing, when ARGV[1] no longer holds the lock
if redis.call('GET', KEYS[3]) ~= ARGV[1] then
  return false
end
local moved = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local n = #moved
if n > 0 then
  redis.call('LTRIM', KEYS[1], n, -1)
  -- unpack() is limited by the Lua stack: push in slices.
  for i = 1, n, 1000 do
    redis.call('RPUSH', KEYS[2], unpack(moved, i, math.min(i + 999, n)))
  end
end
return moved
