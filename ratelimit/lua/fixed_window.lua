-- fixed_window.lua: per strategy, a window of W started by the first admitted
-- hit after the previous window ended; pass iff every strategy has
-- count + cost <= limit. Twin: src/algo/fixed_window.rs.
--
-- KEYS[1]  the only key touched.
-- ARGV[1]  now, integer µs since the epoch; "" = read the server clock (TIME).
-- ARGV[2]  cost, integer >= 0 (may exceed 2^53: then above every limit).
-- ARGV[3]  "1" = peek (decide, write nothing), "0" = check.
-- ARGV[4]  TTL slack in ms added to every PEXPIRE.
-- ARGV[5]  k, the number of strategies (1..16), then k pairs
--          limit_i, window_us_i (declared order) in ARGV[6..5+2k].
-- Returns  {allowed (1|0), limit, remaining, reset_after_us,
--           retry_after_us (-1 = none), violated (bit i-1 = strategy i)}.
--
-- State on Redis: a hash; for strategy i (1-based) "s<i>" = window start µs,
-- "c<i>" = count in that window. A window covers now iff now < start or
-- now - start < W (half-open). Written only when allowed, cost > 0 and not a
-- peek, always followed by PEXPIRE ceil(reset_after_us / 1000) + slack ms.

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
local k = tonumber(ARGV[5])

local raw = redis.call('HGETALL', key)
local h = {}
for j = 1, #raw, 2 do
  h[raw[j]] = raw[j + 1]
end

local limits, windows, starts, counts = {}, {}, {}, {}
local violated, never, bit = 0, false, 1
for i = 1, k do
  local limit = tonumber(ARGV[4 + 2 * i])
  local window = tonumber(ARGV[5 + 2 * i])
  limits[i], windows[i] = limit, window
  local s, c = tonumber(h['s' .. i]), tonumber(h['c' .. i])
  if s and c and (now < s or now - s < window) then
    starts[i], counts[i] = s, c
  else
    starts[i], counts[i] = false, 0
  end
  if cost > limit then never = true end
  if counts[i] + cost > limit then violated = violated + bit end
  bit = bit * 2
end
local allowed = violated == 0

-- Retry (denials only, from the windows before the call): when every violated
-- strategy's window has ended.
local retry = -1
if not allowed and not never then
  retry = 0
  bit = 1
  for i = 1, k do
    if violated % (bit * 2) >= bit and starts[i] then
      local e = starts[i] + windows[i] - now
      if e > retry then retry = e end
    end
    bit = bit * 2
  end
end

-- The windows after the call (as if taken, also for a peek).
local take = allowed and cost > 0
local best_limit, best_rem, reset = 0, nil, 0
for i = 1, k do
  local s, c = starts[i], counts[i]
  if take then
    if s then c = c + cost else s, c = now, cost end
    starts[i], counts[i] = s, c
  end
  local rem = limits[i] - c
  if rem < 0 then rem = 0 end
  if best_rem == nil or rem < best_rem then best_limit, best_rem = limits[i], rem end
  if s then
    local e = s + windows[i] - now
    if e > reset then reset = e end
  end
end

if take and not peek then
  -- Fields of strategies beyond k (a policy that shrank) would otherwise linger.
  if #raw > 4 * k then redis.call('DEL', key) end
  local args = {}
  for i = 1, k do
    args[#args + 1] = 's' .. i
    args[#args + 1] = string.format('%d', starts[i])
    args[#args + 1] = 'c' .. i
    args[#args + 1] = string.format('%d', counts[i])
  end
  redis.call('HSET', key, unpack(args))
  local ms = math.floor((reset + 999) / 1000) + slack
  if ms < 1 then ms = 1 end
  redis.call('PEXPIRE', key, string.format('%d', ms))
end

return {allowed and 1 or 0, best_limit, best_rem or 0, reset, retry, allowed and 0 or violated}
