-- token_bucket.lua: starts full, refills continuously; pass iff tokens >= cost.
-- Twin: src/algo/token_bucket.rs.
--
-- KEYS[1]  the only key touched.
-- ARGV[1]  now, integer µs since the epoch; "" = read the server clock (TIME).
-- ARGV[2]  cost, integer >= 0 (may exceed 2^53: then above the capacity).
-- ARGV[3]  "1" = peek (decide, write nothing), "0" = check.
-- ARGV[4]  TTL slack in ms added to every PEXPIRE.
-- ARGV[5]  capacity (tokens).
-- ARGV[6]  n, ARGV[7] p: the rate in lowest terms, n units per p µs. One token
--          is p units, so the bucket gains n units per µs; full = capacity * p.
-- Returns  {allowed (1|0), limit = capacity, remaining (whole tokens),
--           reset_after_us, retry_after_us (-1 = none), violated = 0}.
--
-- State on Redis: a hash, "u" = units held, "t" = when they were last counted
-- (µs). An absent key is a full bucket (u = full, t = now). Written only when
-- allowed, cost > 0 and not a peek, always followed by
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
local state = redis.call('HMGET', key, 'u', 't')
local units, last = tonumber(state[1]), tonumber(state[2])
if units and last then
  if units > full then units = full end
else
  units, last = full, now
end
if now > last then
  local gained = (now - last) * n
  if gained >= full - units then units = full else units = units + gained end
end

local never = cost > capacity
local need = never and 0 or cost * p
local allowed = not never and units >= need
local after = allowed and units - need or units
local retry = -1
if not allowed and not never then retry = ceil_div(need - units, n) end
local reset = ceil_div(full - after, n)

if allowed and cost > 0 and not peek then
  if now > last then last = now end
  redis.call('HSET', key, 'u', string.format('%d', after), 't', string.format('%d', last))
  local ms = math.floor((reset + 999) / 1000) + slack
  if ms < 1 then ms = 1 end
  redis.call('PEXPIRE', key, string.format('%d', ms))
end

return {allowed and 1 or 0, capacity, math.floor(after / p), reset, retry, 0}
