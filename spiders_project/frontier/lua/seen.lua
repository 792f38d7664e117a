-- The shared seen-set, included (``--!include seen.lua``) by the scripts that
-- record fingerprints, so deduplication stays atomic with what they enqueue.
-- No KEYS/ARGV of its own: the including script passes
--   prefix  the seen-set's key (a counter of fingerprints recorded); its
--           buckets or Bloom blocks are "<prefix>:..." keys in the same slot
--   legacy  the set of 40-hex fingerprints of the previous release, read
--           until ``scrapy dupefilter migrate`` has emptied it
--   spec    "exact", "timed <unit ms>", or "bloom <blocks> <bits per block> <hashes>"
--   now     the caller's time, in ms since the epoch (timed mode only)
--
-- A fingerprint reaches Redis as a token the worker builds (frontier/seen.py):
--   exact  "<root> <v>[ <hex>]": v, the first 8 bytes of Scrapy's fingerprint
--          as a signed 64-bit integer in decimal; root, 9 other bits of it
--          (0..511); the full hex only while the legacy set exists
--   timed  "<root> <v> <after ms>": as exact, and how long ago the URL must
--          have been enqueued last to be enqueued again (0: never again)
--   bloom  "<hex>": the first 32 hex digits of the fingerprint
--
-- Exact mode. v is stored whole in a bucket, a small set of integers, so
-- Redis keeps it as an intset: 8 bytes a member, plus the bucket's own
-- overhead shared by its 128 to 256 members (docs/BENCHMARKS.md, seen-set).
-- The bucket of v at level L is "<prefix>:<L>:<root + 512 * (v mod 2^L)>".
-- The level grows with the count, one level per doubling past 256 members
-- a bucket on average, so buckets stay far below Redis' intset limit
-- (set-max-intset-entries, 512 by default) at any size up to level 15
-- (4.3e9 fingerprints; beyond that buckets grow into hash tables: still
-- exact, not compact). A bucket is split when first touched at a higher
-- level: its members move to their buckets at the new level, computed from
-- the members themselves. The root's 9 bits are not stored, so a new
-- fingerprint is falsely seen only if it equals a stored one in all 64 bits
-- of v and in root: about n / 2^73 (1.1e-13 at 10^9 fingerprints). 512
-- roots keep a small set compact too (10^5 fingerprints fill them to 195).
--
-- Timed mode (RECRAWL_AFTER set). The same buckets, named
-- "<prefix>:t:<L>:<n>", are small hashes v -> the time v was last enqueued,
-- in units since the crawl's epoch, so Redis keeps them as listpacks: v as a
-- 64-bit integer (10 bytes with its header) and the time as a small one
-- (2-4 bytes). They split at a quarter of the intsets' size, as Redis turns
-- a hash of more than 128 fields (hash-max-listpack-entries) into a hash
-- table. The unit and the epoch are the first worker's, recorded in
-- "<prefix>:mode" as "timed <unit ms> <epoch ms>" (a unit of RECRAWL_AFTER / 16:
-- a URL is enqueued again between its RECRAWL_AFTER and one unit later).
--
-- Bloom mode. k bits per fingerprint in one of <blocks> bitmaps of <bits>
-- bits ("<prefix>:b:<block>"), set and read in one BITFIELD call: a new
-- fingerprint is taken for seen with the configured error rate once the
-- filter holds its capacity, more beyond it.
local SEEN_ROOTS = 512
local SEEN_SPLIT_AT = 256
local SEEN_TIMED_SPLIT_AT = 64
local SEEN_MAX_LEVEL = 15

local seen_prefix, seen_legacy, seen_bloom, seen_level
local seen_timed, seen_unit, seen_now
local seen_blocks, seen_bits, seen_hashes
local seen_added = 0
local seen_root_keys = {}  -- root (as in the token) -> its bucket's key, at level 0
local seen_has_legacy = nil

local function seen_fmt(n)
  return string.format('%d', n)
end

-- v mod 2^level, for v a signed 64-bit integer in decimal: exact in doubles,
-- because 10^15 is a multiple of 2^15, so the last 15 digits decide it.
local function seen_low_bits(v, level)
  if level == 0 then return 0 end
  local m = 2 ^ level
  local negative = string.byte(v, 1) == 45
  local digits = negative and string.sub(v, 2) or v
  local low = tonumber(string.sub(digits, -15)) % m
  if negative and low ~= 0 then low = m - low end
  return low
end

local function seen_key(level, root, v)
  local n = seen_fmt(root + SEEN_ROOTS * seen_low_bits(v, level))
  if seen_timed then return seen_prefix .. ':t:' .. level .. ':' .. n end
  return seen_prefix .. ':' .. level .. ':' .. n
end

-- seen_init's ``now``: now_ms(ARGV's time), or now_ms(nil) for Redis' own clock.
--!include redis_access/lua/clock.lua

local function seen_init(prefix, legacy, spec, now)
  seen_prefix, seen_legacy = prefix, legacy
  local blocks, bits, hashes = string.match(spec, '^bloom (%d+) (%d+) (%d+)$')
  if blocks then
    seen_bloom = true
    seen_blocks, seen_bits, seen_hashes = tonumber(blocks), tonumber(bits), tonumber(hashes)
    return
  end
  seen_bloom = false
  local split_at = SEEN_SPLIT_AT
  local unit = string.match(spec, '^timed (%d+)$')
  if unit then
    seen_timed = true
    split_at = SEEN_TIMED_SPLIT_AT
    local mode_key = prefix .. ':mode'
    local mode = redis.call('GET', mode_key)
    if not mode then
      mode = 'timed ' .. unit .. ' ' .. seen_fmt(now)
      redis.call('SET', mode_key, mode)
    end
    local recorded, epoch = string.match(mode, '^timed (%d+) (%d+)$')
    if not recorded then error('the seen-set is not in timed mode: ' .. mode) end
    seen_unit = tonumber(recorded)
    seen_now = math.floor((now - tonumber(epoch)) / seen_unit)
  elseif spec ~= 'exact' then
    error('not a seen-set mode: ' .. string.sub(spec, 1, 100))
  end
  local count = tonumber(redis.call('GET', prefix) or '0')
  local level, cap = 0, split_at * SEEN_ROOTS
  while level < SEEN_MAX_LEVEL and count >= cap do
    level = level + 1
    cap = cap * 2
  end
  seen_level = level
end

-- The bucket of (root, v) at the current level, splitting the first ancestor
-- found if the bucket does not exist yet.
local function seen_bucket(root, v)
  local key = seen_key(seen_level, root, v)
  if seen_level == 0 or redis.call('EXISTS', key) == 1 then return key end
  for level = seen_level - 1, 0, -1 do
    local parent = seen_key(level, root, v)
    -- A set's members, or a hash's fields and values (timed mode).
    local members = redis.call(seen_timed and 'HGETALL' or 'SMEMBERS', parent)
    if #members > 0 then
      local children = {}
      local step = seen_timed and 2 or 1
      for i = 1, #members, step do
        local child = seen_key(seen_level, root, members[i])
        local list = children[child]
        if not list then
          list = {}
          children[child] = list
        end
        for j = i, i + step - 1 do list[#list + 1] = members[j] end
      end
      for child, list in pairs(children) do
        redis.call(seen_timed and 'HSET' or 'SADD', child, unpack(list))
      end
      redis.call('DEL', parent)
      return key
    end
  end
  return key
end

local function seen_in_legacy(hex)
  if not hex or hex == '' then return false end
  if seen_has_legacy == nil then seen_has_legacy = redis.call('EXISTS', seen_legacy) == 1 end
  return seen_has_legacy and redis.call('SISMEMBER', seen_legacy, hex) == 1
end

-- Record the fingerprint of ``token``; true if it was not seen before.
local function seen_add(token)
  if seen_bloom then
    if not string.match(token, '^%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x$') then
      error('not a seen-set token: ' .. string.sub(token, 1, 100))
    end
    local block = tonumber(string.sub(token, 27, 32), 16) % seen_blocks
    local h1 = tonumber(string.sub(token, 1, 13), 16) % seen_bits
    local h2 = tonumber(string.sub(token, 14, 26), 16) % seen_bits
    if h2 == 0 then h2 = 1 end
    local args = {}
    for i = 0, seen_hashes - 1 do
      args[#args + 1] = 'SET'
      args[#args + 1] = 'u1'
      args[#args + 1] = seen_fmt((h1 + i * h2) % seen_bits)
      args[#args + 1] = 1
    end
    local old = redis.call('BITFIELD', seen_prefix .. ':b:' .. block, unpack(args))
    for _, bit in ipairs(old) do
      if bit == 0 then
        seen_added = seen_added + 1
        return true
      end
    end
    return false
  end
  if seen_timed then
    local root, v, after = string.match(token, '^(%d+) (-?%d+) (%d+)$')
    if not root then error('not a seen-set token: ' .. string.sub(token, 1, 100)) end
    local key = seen_bucket(tonumber(root), v)
    local last = redis.call('HGET', key, v)
    if last then
      local units = math.ceil(tonumber(after) / seen_unit)
      if units == 0 or seen_now - tonumber(last) < units then return false end
    else
      seen_added = seen_added + 1
    end
    redis.call('HSET', key, v, seen_now)
    return true
  end
  -- Split by plain finds, not one pattern with captures, and each root's
  -- key made once a call at level 0 (both showed in enqueue.lua's profile).
  local sp = string.find(token, ' ', 1, true)
  local root = sp and string.sub(token, 1, sp - 1)
  local hex_at = sp and string.find(token, ' ', sp + 1, true)
  local v = sp and string.sub(token, sp + 1, hex_at and hex_at - 1)
  -- tonumber, not a pattern, checks them: patterns showed in the same profile.
  if not v or not tonumber(root) or not tonumber(v) then
    error('not a seen-set token: ' .. string.sub(token, 1, 100))
  end
  if hex_at and seen_in_legacy(string.sub(token, hex_at + 1)) then return false end
  local key = seen_level == 0 and seen_root_keys[root]
  if not key then
    key = seen_bucket(tonumber(root), v)
    if seen_level == 0 then seen_root_keys[root] = key end
  end
  if redis.call('SADD', key, v) == 1 then
    seen_added = seen_added + 1
    return true
  end
  return false
end

-- Count what this call recorded (call once, at the end).
local function seen_done()
  if seen_added > 0 then redis.call('INCRBY', seen_prefix, seen_added) end
end
