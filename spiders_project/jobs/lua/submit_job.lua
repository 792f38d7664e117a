-- One run of a crawl job starts: its record, its event and its seeds in one
-- step (``--!include submit_job.lua``: submit.lua and schedule_tick.lua).
-- A job is never registered without its seeds, nor seeded without its record.
--
-- submit_job(jobs, events, start_urls, now, first)
--   jobs        KEYS: hash job id -> record JSON
--   events      KEYS: stream of the jobs' state changes
--   start_urls  KEYS: the spider's seed list
--   now         ms on the scripts' clock
--   first       index in ARGV of the run's arguments, which are, in order:
--     job id, run id, "via" (submit or schedule), record JSON without its
--     started_at (an object with at least one field: jobs/submit.py builds it),
--     number of seeds, events stream's MAXLEN (approximate), who asked for
--     the run ("" for nobody named: the event then has no "by"), then the seed
--     entries (JSON seeds), pushed so that the first is read first.
-- Returns     nothing; the record's started_at is ``now``.
local function submit_job(jobs, events, start_urls, now, first)
  local id, run, via = ARGV[first], ARGV[first + 1], ARGV[first + 2]
  local record = string.sub(ARGV[first + 3], 1, -2) .. ',"started_at":' .. string.format('%d', now) .. '}'
  redis.call('HSET', jobs, id, record)
  for i = first + 7, #ARGV do
    redis.call('LPUSH', start_urls, ARGV[i])
  end
  local fields = {'job', id, 'state', 'running', 'run', run, 'via', via,
    'seeds', ARGV[first + 4], 'at', string.format('%d', now)}
  if ARGV[first + 6] ~= '' then
    table.insert(fields, 'by')
    table.insert(fields, ARGV[first + 6])
  end
  redis.call('XADD', events, 'MAXLEN', '~', ARGV[first + 5], '*', unpack(fields))
end
