-- Set the db_writer lock to a token, if it still holds the expected one.
-- With expected == new token this extends the lock; with the token of a
-- writer known to be dead it takes the lock over.
--
-- KEYS[1]  db_writer lock
-- ARGV[1]  the token the lock must hold now
-- ARGV[2]  the token to set
-- ARGV[3]  time to live, in milliseconds
-- Returns  1 if the lock was set, 0 if it held something else (or nothing)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', tonumber(ARGV[3]))
return 1
