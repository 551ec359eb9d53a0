-- sliding_window.lua: counts in sub-windows of `precision` P aligned to
-- multiples of P; a strategy of window W sums the W/P most recent
-- sub-windows, the current one included. Twin: src/algo/sliding_window.rs.
--
-- Loaded after prelude.lua, which sets `key`, `now` and `cost` from
-- KEYS[1], ARGV[1] and ARGV[2].
--
-- KEYS[1]  the only key touched.
-- ARGV[1]  now, integer µs since the epoch; "" = read the server clock (TIME).
-- ARGV[2]  cost, integer >= 0 (may exceed 2^53: then above every limit).
-- ARGV[3]  "1" = peek (decide, write nothing), "0" = check.
-- ARGV[4]  TTL slack in ms added to every PEXPIRE.
-- ARGV[5]  precision_us (divides every window).
-- ARGV[6]  k, the number of strategies (1..16), then k pairs
--          limit_i, window_us_i (declared order) in ARGV[7..6+2k].
-- Returns  {allowed (1|0), limit, remaining, reset_after_us,
--           retry_after_us (-1 = none), violated (bit i-1 = strategy i),
--           now (µs: the time the decision was made at)}; limit and
--           remaining are the strategy with the least room. Only when
--           k > 1, followed by k pairs remaining_i, reset_after_us_i
--           (declared order): each strategy's own state after the call.
--
-- State on Redis: a hash from sub-window index floor(t / P) (a "%d" string)
-- to its count. With current = floor(now / P) and span_i = W_i / P, strategy i
-- counts the fields with current - span_i < index <= current; fields with
-- index + widest_span <= current never count again and are deleted on the
-- next write. Written only when allowed, cost > 0 and not a peek (HINCRBY
-- of the current field, HDEL of dead ones), always followed by PEXPIRE
-- ceil(reset_after_us / 1000) + slack ms. Every call reads every field;
-- sliding_window_totals.lua keeps running totals instead, and the runtime
-- uses it from 16 sub-windows on. A write here deletes that layout's non-index fields, so the
-- two layouts can follow each other on a key.

local precision = ARGV[5] + 0
local k = ARGV[6] + 0

local current = math.floor(now / precision)
local limits, spans, counts = {}, {}, {}
local widest = 0
for i = 1, k do
  limits[i] = ARGV[5 + 2 * i] + 0
  spans[i] = math.floor(ARGV[6 + 2 * i] / precision)
  if spans[i] > widest then widest = spans[i] end
  counts[i] = 0
end

local raw = redis.call('HGETALL', key)
local stale = {}
local newest = nil
for j = 1, #raw, 2 do
  local idx, c = tonumber(raw[j]), tonumber(raw[j + 1])
  if idx and c then
    if idx + widest <= current then
      stale[#stale + 1] = raw[j]
    else
      if newest == nil or idx > newest then newest = idx end
      if idx <= current then
        for i = 1, k do
          if idx + spans[i] > current then counts[i] = counts[i] + c end
        end
      end
    end
  else
    -- A field of the totals layout (sliding_window_totals.lua): its totals
    -- would miss this script's writes, so a write drops them.
    stale[#stale + 1] = raw[j]
  end
end

local violated, never, bit = 0, false, 1
for i = 1, k do
  if cost > limits[i] then never = true end
  if counts[i] + cost > limits[i] then violated = violated + bit end
  bit = bit * 2
end
local allowed = violated == 0
local taken = allowed and cost or 0

local best_limit, best_rem = 0, nil
for i = 1, k do
  local rem = limits[i] - (counts[i] + taken)
  if rem < 0 then rem = 0 end
  if best_rem == nil or rem < best_rem then best_limit, best_rem = limits[i], rem end
end

if taken > 0 then
  if newest == nil or newest < current then newest = current end
end
local reset = 0
if newest ~= nil then
  reset = (newest + widest) * precision - now
  if reset < 0 then reset = 0 end
end
-- Per strategy (k > 1): its newest counted sub-window leaves it at
-- (newest + span_i) * P.
local quotas = {}
if k > 1 then
  for i = 1, k do
    local rem = limits[i] - (counts[i] + taken)
    if rem < 0 then rem = 0 end
    local e = 0
    if newest ~= nil then
      e = (newest + spans[i]) * precision - now
      if e < 0 then e = 0 end
    end
    quotas[2 * i - 1], quotas[2 * i] = rem, e
  end
end

-- Retry (denials only): per violated strategy, drop its sub-windows oldest
-- first until the cost fits; the latest of those times.
local retry = -1
if not allowed and not never then
  local live = {}
  for j = 1, #raw, 2 do
    local idx, c = tonumber(raw[j]), tonumber(raw[j + 1])
    if idx and c and idx + widest > current and idx <= current then live[#live + 1] = {idx, c} end
  end
  table.sort(live, function(a, b) return a[1] < b[1] end)
  retry = 0
  bit = 1
  for i = 1, k do
    if violated % (bit * 2) >= bit then
      local left = counts[i]
      local passes_at = (current + 1) * precision
      for j = 1, #live do
        local e = live[j]
        if e[1] + spans[i] > current then
          left = left - e[2]
          passes_at = (e[1] + spans[i]) * precision
          if left + cost <= limits[i] then break end
        end
      end
      local r = passes_at - now
      if r > retry then retry = r end
    end
    bit = bit * 2
  end
end

if taken > 0 and ARGV[3] ~= '1' then
  redis.call('HINCRBY', key, string.format('%d', current), ARGV[2])
  for j = 1, #stale, 1000 do
    redis.call('HDEL', key, unpack(stale, j, math.min(j + 999, #stale)))
  end
  local ms = math.floor((reset + 999) / 1000) + ARGV[4]
  if ms < 1 then ms = 1 end
  redis.call('PEXPIRE', key, string.format('%d', ms))
end

local reply = {allowed and 1 or 0, best_limit, best_rem or 0, reset, retry, allowed and 0 or violated, now}
for i = 1, #quotas do reply[7 + i] = quotas[i] end
return reply
