-- gcra.lua: the generic cell rate algorithm, answering as redis-cell's
-- CL.THROTTLE key burst count period qty does. Twin: src/algo/gcra.rs.
--
-- Loaded after prelude.lua, which sets `key`, `now` and `cost` from
-- KEYS[1], ARGV[1] and ARGV[2].
--
-- KEYS[1]  the only key touched.
-- ARGV[1]  now, integer µs since the epoch; "" = read the server clock (TIME).
-- ARGV[2]  cost, integer >= 0 (may exceed 2^53: then above the limit).
-- ARGV[3]  "1" = peek (decide, write nothing), "0" = check.
-- ARGV[4]  TTL slack in ms added to the PX of every SET.
-- ARGV[5]  burst; limit = burst + 1.
-- ARGV[6]  n, ARGV[7] p: the rate in lowest terms, n per p µs. Times are in
--          units of 1/n µs: the emission interval is p units, the tolerance
--          (burst + 1) * p units.
-- Returns  {allowed (1|0), limit = burst + 1, remaining, reset_after_us,
--           retry_after_us (-1 = none), violated = 0,
--           now (µs: the time the decision was made at)}.
--
-- State on Redis: a string holding the theoretical arrival time (TAT):
-- "<tat_us>" when the remainder is 0, else "<tat_us>:<rem>" with 0 < rem < n
-- (exact TAT = tat_us + rem / n µs). Written (SET ... PX) only when allowed,
-- cost > 0 and not a peek, with PX = ceil(reset_after_us / 1000) + slack ms.

-- Lean by measurement (issue 6, instructions per call counted under
-- callgrind): no closures or tables but the reply, numeric ARGV read with
-- `+ 0`, the stored TAT read with one tonumber() unless it carries a
-- remainder, no division when n = 1 (every rate whose count divides its
-- period, e.g. 1000/1s), the slack added only when there is one.
local limit = ARGV[5] + 1
local n = ARGV[6] + 0
local p = ARGV[7] + 0
local tolerance = limit * p

-- How far the TAT is ahead of now, in units (redis-cell's ttl).
local debt = 0
local v = redis.call('GET', key)
if v then
  local us, rem = tonumber(v), 0
  if not us then
    local colon = string.find(v, ':', 1, true)
    if colon then
      us, rem = tonumber(string.sub(v, 1, colon - 1)), tonumber(string.sub(v, colon + 1))
    end
  end
  if us and rem and us >= now then debt = (us - now) * n + rem end
end

local never = cost > limit
local increment = never and 0 or cost * p
local allowed = not never and debt + increment <= tolerance
local ttl = allowed and debt + increment or debt
-- retry = ceil(a / n), reset = ceil(ttl / n), on integers held in doubles:
-- floor, then step up if short.
local retry, reset = -1, ttl
if n ~= 1 then
  reset = math.floor(ttl / n)
  if reset * n < ttl then reset = reset + 1 end
end
if not allowed and not never then
  local a = debt + increment - tolerance
  retry = a
  if n ~= 1 then
    retry = math.floor(a / n)
    if retry * n < a then retry = retry + 1 end
  end
end
local remaining = tolerance - ttl
if remaining < 0 then remaining = 0 end

if allowed and cost > 0 and ARGV[3] ~= '1' then
  local value
  if n == 1 then
    value = string.format('%d', now + ttl)
  else
    local whole = math.floor(ttl / n)
    local rem = ttl - whole * n
    if rem == 0 then
      value = string.format('%d', now + whole)
    else
      value = string.format('%d:%d', now + whole, rem)
    end
  end
  local ms = math.floor((reset + 999) / 1000)
  if ARGV[4] ~= '0' then ms = ms + ARGV[4] end
  if ms < 1 then ms = 1 end
  redis.call('SET', key, value, 'PX', string.format('%d', ms))
end

return {allowed and 1 or 0, limit, math.floor(remaining / p), reset, retry, 0, now}
