-- Taking requests from one host's queues, in the order lease.lua's header
-- gives: its sorted set's requests of priority above 0 (score < 0), its list
-- (first in, first out), then the rest of its sorted set. Included by
-- lease.lua; touches only the keys it is given.
--
-- Up to n requests of one host, in that order, as a flat
-- {request, queue score, ...} list ("L" for the list's), and the error of a
-- key of the wrong type, if any (with what was taken before it).
local function take_from(queue, list, n)
  local out = {}
  local function pop(reply, from_list)
    if type(reply) == 'table' and reply.err then return reply.err end
    for _, v in ipairs(reply or {}) do
      out[#out + 1] = v
      if from_list then out[#out + 1] = 'L' end
    end
    n = n - #(reply or {}) / (from_list and 1 or 2)
  end
  local above = redis.pcall('ZCOUNT', queue, '-inf', '(0')
  if type(above) == 'table' then return out, above.err end
  local err
  if above > 0 then err = pop(redis.pcall('ZPOPMIN', queue, math.min(above, n))) end
  if not err and n > 0 then err = pop(redis.pcall('LPOP', list, n), true) end
  if not err and n > 0 then err = pop(redis.pcall('ZPOPMIN', queue, n)) end
  return out, err
end
