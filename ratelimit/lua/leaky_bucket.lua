-- leaky_bucket.lua: starts empty, drains continuously; a call adds its cost
-- to the level and passes iff the level stays within capacity.
-- Twin: src/algo/leaky_bucket.rs.
--
-- KEYS[1]  the only key touched.
-- ARGV[1]  now, integer µs since the epoch; "" = read the server clock (TIME).
-- ARGV[2]  cost, integer >= 0 (may exceed 2^53: then above the capacity).
-- ARGV[3]  "1" = peek (decide, write nothing), "0" = check.
-- ARGV[4]  TTL slack in ms added to every PEXPIRE.
-- ARGV[5]  capacity (requests).
-- ARGV[6]  n, ARGV[7] p: the rate in lowest terms, n units per p µs. One
--          request is p units, the bucket drains n units per µs;
--          full = capacity * p.
-- Returns  {allowed (1|0), limit = capacity, remaining (whole requests),
--           reset_after_us, retry_after_us (-1 = none), violated = 0}.
--
-- State on Redis: a hash, "l" = level in units, "t" = when it was last
-- drained (µs). An absent key is an empty bucket (l = 0, t = now). Written
-- only when allowed, cost > 0 and not a peek, always followed by
-- PEXPIRE ceil(reset_after_us / 1000) + slack ms.

local key = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local cost = tonumber(ARGV[2])
local peek = ARGV[3] == '1'
local slack = tonumber(ARGV[4])
local capacity = tonumber(ARGV[5])
local n = tonumber(ARGV[6])
local p = tonumber(ARGV[7])

local function ceil_div(a, b)
  local q = math.floor(a / b)
  if q * b < a then q = q + 1 end
  return q
end

local full = capacity * p
local state = redis.call('HMGET', key, 'l', 't')
local level, last = tonumber(state[1]), tonumber(state[2])
if not (level and last) then
  level, last = 0, now
end
if now > last then
  local drained = (now - last) * n
  if drained >= level then level = 0 else level = level - drained end
end

local never = cost > capacity
local need = never and 0 or cost * p
local allowed = not never and level + need <= full
local after = allowed and level + need or level
local retry = -1
if not allowed and not never then retry = ceil_div(level + need - full, n) end
local remaining = full - after
if remaining < 0 then remaining = 0 end
local reset = ceil_div(after, n)

if allowed and cost > 0 and not peek then
  if now > last then last = now end
  redis.call('HSET', key, 'l', string.format('%d', after), 't', string.format('%d', last))
  local ms = math.floor((reset + 999) / 1000) + slack
  if ms < 1 then ms = 1 end
  redis.call('PEXPIRE', key, string.format('%d', ms))
end

return {allowed and 1 or 0, capacity, math.floor(remaining / p), reset, retry, 0}
