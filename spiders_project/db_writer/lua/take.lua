#!lua flags=allow-oom
-- Allowed under OOM: it moves entries between two lists, so memory stays level
-- (the db_writer must drain a Redis that is full), and changes one number of
-- the writers' hash.
--
-- Move up to N entries from the head of an item buffer to the tail of this
-- writer's processing list, while this writer is still one of the buffer's
-- writers.
--
-- Producers RPUSH to the tail of the buffer, so taking from the head keeps
-- items first in, first out; appending to the processing list keeps it in the
-- same order, so the batch in hand is always its first entries. Any number of
-- writers take from one buffer: each take runs whole, so an entry lands in one
-- writer's list only, and each list has one writer appending to it.
--
-- KEYS[1]  item buffer: list of JSON items (<spider>:items)
-- KEYS[2]  this writer's processing list: entries taken and not yet committed
-- KEYS[3]  the buffer's writers: hash writer id -> entries in its processing list
-- ARGV[1]  this writer's id
-- ARGV[2]  N, the most entries to move
-- Returns  the moved entries, oldest first (possibly none), or false, moving
--          nothing, when ARGV[1] is no longer in KEYS[3]: another writer took
--          its batch over (it stalled past its lease)
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 0 then
  return false
end
local moved = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local n = #moved
if n > 0 then
  redis.call('LTRIM', KEYS[1], n, -1)
  local length
  -- unpack() is limited by the Lua stack: push in slices.
  for i = 1, n, 1000 do
    length = redis.call('RPUSH', KEYS[2], unpack(moved, i, math.min(i + 999, n)))
  end
  redis.call('HSET', KEYS[3], ARGV[1], length)
end
return moved
