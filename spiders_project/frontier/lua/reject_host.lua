#!lua flags=allow-oom
-- Set aside a host name of the ready-set that is not ours (not UTF-8): remove
-- it, and keep it in requests:rejected once, however many workers saw it.
-- Allowed under OOM: it frees as much as it keeps.
--
-- KEYS[1]  hosts: ready-set, host -> time (ms) it may next be fetched
-- KEYS[2]  requests:rejected: list of entries set aside
-- ARGV[1]  the host name, as read
-- Returns  1 if this call removed it, else 0
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('LPUSH', KEYS[2], 'host ' .. ARGV[1])
  return 1
end
return 0
