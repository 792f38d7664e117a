#!lua flags=allow-oom
-- Allowed under OOM: it moves entries between two lists, so memory stays level
-- (the db_writer must drain a Redis that is full), changes one number of the
-- writers' hash, and sets or deletes one small key.
--
-- Move up to N entries from the head of an item buffer to the tail of this
-- writer's processing list, while this writer is still one of the buffer's
-- writers. The writer then reads them from its list (LRANGE from the offset
-- this returns): handing them back from Lua would copy each entry twice more
-- (into a Lua string, then into the reply).
--
-- Producers RPUSH to the tail of the buffer, so taking from the head keeps
-- items first in, first out; appending to the processing list keeps it in the
-- same order, so the batch in hand is always its first entries. Any number of
-- writers take from one buffer: each take runs whole, so an entry lands in one
-- writer's list only, and each list has one writer appending to it.
--
-- Into an empty processing list (every batch of a drain) the entries are
-- copied by SORT ... BY nosort LIMIT 0 N STORE, in C: a list keeps its order
-- under BY nosort (only sets are sorted for determinism), and the LIMIT reads
-- the head alone. It costs Redis a third of LRANGE into Lua then RPUSH
-- (docs/BENCHMARKS.md, "The db_writer's cost per item"). STORE replaces its
-- destination, so a take that adds to a batch being filled moves through Lua.
--
-- A take that starts a batch (ARGV[3] > 0) and finds fewer than N entries
-- marks the buffer as being filled by this writer (KEYS[4], for ARGV[3] ms:
-- the writer's DB_WRITER_MAX_WAIT), and the writer takes again later. While
-- another writer's mark lives, a take that would start a batch moves nothing
-- and answers -1: the other writer takes what comes, so two writers do not
-- split the buffer's trickle into twice the takes and half-full batches. A
-- take that fills its batch ends its writer's mark.
--
-- KEYS[1]  item buffer: list of JSON items (<spider>:items, or a frontier
--          shard's {<spider>/<n>}:items; every key here shares its slot)
-- KEYS[2]  this writer's processing list: entries taken and not yet committed
-- KEYS[3]  the buffer's writers: hash writer id -> entries in its processing list
-- KEYS[4]  the buffer's filling mark: the id of the writer filling a batch
-- ARGV[1]  this writer's id
-- ARGV[2]  N, the most entries to move
-- ARGV[3]  0, or when this take starts a batch, the ms its writer may fill it for
-- Returns  {moved, held}: the number of entries moved (possibly 0) and the
--          length of the processing list before them, where they start; -1,
--          moving nothing, when another writer is filling a batch from the
--          buffer (ARGV[3] > 0 only); or false, moving nothing, when ARGV[1]
--          is no longer in KEYS[3]: another writer took its batch over (it
--          stalled past its lease)
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 0 then
  return false
end
local fill_ms = tonumber(ARGV[3])
local filler = redis.call('GET', KEYS[4])
if fill_ms > 0 and filler and filler ~= ARGV[1] then
  return -1
end
local want = tonumber(ARGV[2])
local held = redis.call('LLEN', KEYS[2])
local n
if held == 0 then
  redis.call('SORT', KEYS[1], 'BY', 'nosort', 'LIMIT', 0, want, 'STORE', KEYS[2])
  n = redis.call('LLEN', KEYS[2])
else
  local moved = redis.call('LRANGE', KEYS[1], 0, want - 1)
  n = #moved
  -- unpack() is limited by the Lua stack: push in slices.
  for i = 1, n, 1000 do
    redis.call('RPUSH', KEYS[2], unpack(moved, i, math.min(i + 999, n)))
  end
end
if n > 0 then
  redis.call('LTRIM', KEYS[1], n, -1)
  redis.call('HSET', KEYS[3], ARGV[1], held + n)
end
if n == want then
  if filler == ARGV[1] then
    redis.call('DEL', KEYS[4])
  end
elseif n > 0 and fill_ms > 0 then
  redis.call('SET', KEYS[4], ARGV[1], 'PX', fill_ms)
end
return {n, held}
