-- A jar's session: its login state ("~login") and its pinned proxy ("~proxy"),
-- changed atomically for the whole cluster. cookies/sessions.py says what each
-- state means and holds the same rules in Python (for COOKIES_SHARED=False);
-- the tests run the same cases on both.
--
-- Not flagged allow-oom: a refused change is retried by the caller's next
-- expired answer or request, and nothing else waits on it.
--
-- KEYS[1]  the jar: hash of cookie fields, "~v" (its version: update.lua) and
--          the control fields set here
-- KEYS[2]  the spider's jars: sorted set of jar id -> time (ms) of last update or use
-- KEYS[3]  the spider's jar counts: hash of jar id -> cookies in it
-- ARGV[1]  now, in ms since the epoch, or "" for Redis' own clock (TIME)
-- ARGV[2]  the jar's id
-- ARGV[3]  the jar's time to live (ms) after a change (COOKIES_JAR_TTL)
-- ARGV[4]  what happened, then its arguments:
--   "expired", sent, token, timeout (ms), attempts: an answer to a request sent
--            with the jar at version `sent` says its session is gone. Returns
--            "login" (the caller logs in, marking its requests with `token`,
--            until now + timeout), "wait", "stale" or "fail".
--   "ended", token, ok ("1" or "0"), attempts, reason: the login `token` ended.
--            Returns "done", "retry", "fail" or "gone".
--   "confirmed", sent: a page sent at version `sent` was not expired; its
--            logins held. Returns "confirmed" or "unchanged"; no new version
--            (nothing a request sends changed).
--   "pin", proxy: pin the jar to `proxy` unless it has a proxy. Returns "pinned".
--   "retire", old, new: `old` is banned. If the jar is still pinned to it, its
--            cookies are deleted, it is pinned to `new` and its session starts
--            afresh: "retired"; else "moved" (another worker retired it).
-- Returns  {what, the login state (JSON), the jar's version, its proxy or ""}.
--          Every change but "confirmed" adds 1 to the version, so every
--          worker reads the jar whole before its next request of it.
--!include redis_access/lua/clock.lua
local now = now_ms(ARGV[1])
local jar, jars, counts = KEYS[1], KEYS[2], KEYS[3]
local id, ttl, op = ARGV[2], tonumber(ARGV[3]), ARGV[4]

local function fresh()
  return {s = 'ok', n = 0, v = 0, t = '', u = 0, r = ''}
end

local function read()
  local state = fresh()
  local raw = redis.call('HGET', jar, '~login')
  if raw then
    local ok, data = pcall(cjson.decode, raw)
    if ok and type(data) == 'table' and (data.s == 'ok' or data.s == 'run' or data.s == 'fail') then
      for name, default in pairs(state) do
        if type(data[name]) == type(default) then state[name] = data[name] end
      end
    end
  end
  return state
end

local function version()
  return tonumber(redis.call('HGET', jar, '~v')) or 0
end

local function proxy()
  return redis.call('HGET', jar, '~proxy') or ''
end

local function reply(what, state)
  return {what, cjson.encode(state), version(), proxy()}
end

-- The jar made if it is not there (its version starts at now, as update.lua's).
local function made()
  if redis.call('EXISTS', jar) == 0 then
    redis.call('HSET', jar, '~v', now)
    redis.call('HSET', counts, id, 0)
  end
end

-- One change of the jar: a new version, and its time to live renewed.
local function bump()
  local v = redis.call('HINCRBY', jar, '~v', 1)
  redis.call('PEXPIRE', jar, ttl)
  redis.call('ZADD', jars, now, id)
  return v
end

local function write(state)
  redis.call('HSET', jar, '~login', cjson.encode(state))
end

local state = read()

if op == 'expired' then
  local sent, token = tonumber(ARGV[5]), ARGV[6]
  local timeout, attempts = tonumber(ARGV[7]), tonumber(ARGV[8])
  if state.s == 'fail' then return reply('fail', state) end
  if state.s == 'run' and state.u > now then return reply('wait', state) end
  if sent < state.v then return reply('stale', state) end
  -- A login past its deadline counts as one that failed.
  local n = state.n + 1
  made()
  if n > attempts then
    state.s, state.t, state.u = 'fail', '', 0
    state.r = 'still expired after ' .. state.n .. ' logins'
    write(state)
    bump()
    return reply('fail', state)
  end
  state = {s = 'run', n = n, v = state.v, t = token, u = now + timeout, r = ''}
  write(state)
  bump()
  return reply('login', state)
end

if op == 'ended' then
  local token, ok, attempts, reason = ARGV[5], ARGV[6] == '1', tonumber(ARGV[7]), ARGV[8]
  if state.s ~= 'run' or state.t ~= token then return reply('gone', state) end
  local what
  if ok then
    -- The session counts from the version this change makes.
    state = {s = 'ok', n = state.n, v = version() + 1, t = '', u = 0, r = ''}
    what = 'done'
  elseif state.n >= attempts then
    local why = 'login failed ' .. state.n .. ' times, last: ' .. reason
    state = {s = 'fail', n = state.n, v = state.v, t = '', u = 0, r = why}
    what = 'fail'
  else
    state = {s = 'ok', n = state.n, v = state.v, t = '', u = 0, r = ''}
    what = 'retry'
  end
  write(state)
  bump()
  return reply(what, state)
end

if op == 'confirmed' then
  local sent = tonumber(ARGV[5])
  if state.s == 'ok' and state.n > 0 and sent >= state.v then
    state.n = 0
    write(state)
    return reply('confirmed', state)
  end
  return reply('unchanged', state)
end

if op == 'pin' then
  if proxy() ~= '' then return reply('pinned', state) end
  made()
  redis.call('HSET', jar, '~proxy', ARGV[5])
  bump()
  return reply('pinned', state)
end

if op == 'retire' then
  local old, new = ARGV[5], ARGV[6]
  if proxy() ~= old then return reply('moved', state) end
  for _, field in ipairs(redis.call('HKEYS', jar)) do
    if string.sub(field, 1, 1) ~= '~' then
      redis.call('HDEL', jar, field)
    end
  end
  redis.call('HSET', jar, '~proxy', new)
  redis.call('HSET', counts, id, 0)
  if state.s ~= 'fail' then
    state = {s = 'ok', n = 0, v = version() + 1, t = '', u = 0, r = ''}
    write(state)
  end
  bump()
  return reply('retired', state)
end

return redis.error_reply('session.lua: unknown op ' .. tostring(op))
