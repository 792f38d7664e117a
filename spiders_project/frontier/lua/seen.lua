-- The shared seen-set, included (``--!include seen.lua``) by the scripts that
-- record fingerprints, so deduplication stays atomic with what they enqueue.
-- No KEYS/ARGV of its own: the including script passes
--   prefix  the seen-set's key (a counter of fingerprints recorded); its
--           buckets or Bloom blocks are "<prefix>:..." keys in the same slot
--   legacy  the set of 40-hex fingerprints of the previous release, read
--           until ``scrapy dupefilter migrate`` has emptied it
--   spec    "exact", or "bloom <blocks> <bits per block> <hashes>"
--
-- A fingerprint reaches Redis as a token the worker builds (frontier/seen.py):
--   exact  "<root> <v>[ <hex>]": v, the first 8 bytes of Scrapy's fingerprint
--          as a signed 64-bit integer in decimal; root, 9 other bits of it
--          (0..511); the full hex only while the legacy set exists
--   bloom  "<hex>": the first 32 hex digits of the fingerprint
--
-- Exact mode. v is stored whole in a bucket, a small set of integers, so
-- Redis keeps it as an intset: 8 bytes a member, plus the bucket's own
-- overhead shared by its 128 to 256 members (docs/BENCHMARKS.md, issue 13).
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
-- Bloom mode. k bits per fingerprint in one of <blocks> bitmaps of <bits>
-- bits ("<prefix>:b:<block>"), set and read in one BITFIELD call: a new
-- fingerprint is taken for seen with the configured error rate once the
-- filter holds its capacity, more beyond it.
local SEEN_ROOTS = 512
local SEEN_SPLIT_AT = 256
local SEEN_MAX_LEVEL = 15

local seen_prefix, seen_legacy, seen_bloom, seen_level
local seen_blocks, seen_bits, seen_hashes
local seen_added = 0
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
  return seen_prefix .. ':' .. level .. ':' .. seen_fmt(root + SEEN_ROOTS * seen_low_bits(v, level))
end

local function seen_init(prefix, legacy, spec)
  seen_prefix, seen_legacy = prefix, legacy
  local blocks, bits, hashes = string.match(spec, '^bloom (%d+) (%d+) (%d+)$')
  if blocks then
    seen_bloom = true
    seen_blocks, seen_bits, seen_hashes = tonumber(blocks), tonumber(bits), tonumber(hashes)
    return
  end
  seen_bloom = false
  local count = tonumber(redis.call('GET', prefix) or '0')
  local level, cap = 0, SEEN_SPLIT_AT * SEEN_ROOTS
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
    local members = redis.call('SMEMBERS', parent)
    if #members > 0 then
      local children = {}
      for _, member in ipairs(members) do
        local child = seen_key(seen_level, root, member)
        local list = children[child]
        if not list then
          list = {}
          children[child] = list
        end
        list[#list + 1] = member
      end
      for child, list in pairs(children) do redis.call('SADD', child, unpack(list)) end
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
  local root, v, hex = string.match(token, '^(%d+) (-?%d+) ?(%x*)$')
  if not root then error('not a seen-set token: ' .. string.sub(token, 1, 100)) end
  if seen_in_legacy(hex) then return false end
  if redis.call('SADD', seen_bucket(tonumber(root), v), v) == 1 then
    seen_added = seen_added + 1
    return true
  end
  return false
end

-- Count what this call recorded (call once, at the end).
local function seen_done()
  if seen_added > 0 then redis.call('INCRBY', seen_prefix, seen_added) end
end
