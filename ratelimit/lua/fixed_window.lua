-- fixed_window.lua: per strategy, a window of W started by the first admitted
-- hit after the previous window ended; pass iff every strategy has
-- count + cost <= limit. Twin: src/algo/fixed_window.rs.
--
-- Loaded after prelude.lua, which sets `key`, `now` and `cost` from
-- KEYS[1], ARGV[1] and ARGV[2].
--
-- KEYS[1]  the only key touched.
-- ARGV[1]  now, integer µs since the epoch; "" = read the server clock (TIME).
-- ARGV[2]  cost, integer >= 0 (may exceed 2^53: then above every limit).
-- ARGV[3]  "1" = peek (decide, write nothing), "0" = check.
-- ARGV[4]  TTL slack in ms added to every PEXPIRE.
-- ARGV[5]  k, the number of strategies (1..16), then k pairs
--          limit_i, window_us_i (declared order) in ARGV[6..5+2k].
-- Returns  {allowed (1|0), limit, remaining, reset_after_us,
--           retry_after_us (-1 = none), violated (bit i-1 = strategy i),
--           now (µs: the time the decision was made at)}; limit and
--           remaining are the strategy with the least room. Only when
--           k > 1, followed by k pairs remaining_i, reset_after_us_i
--           (declared order): each strategy's own state after the call.
--
-- State on Redis: a hash; for strategy i (1-based) "s<i>" = window start µs,
-- "c<i>" = count in that window. A window covers now iff now < start or
-- now - start < W (half-open). Written only when allowed, cost > 0 and not a
-- peek. A write that starts (or runs before the start of) any window
-- rewrites every field, then PEXPIRE ceil(reset_after_us / 1000) + slack
-- ms; a write inside live windows only adds the cost to each count
-- (HINCRBY), the TTL already covering the latest window's end: three
-- commands in all on the common path (issue 6).

-- One strategy (issue 6: the common case, measured against a bare INCR):
-- the same rules with no tables or loops, and a reply built once. s2 is
-- read only to find fields an earlier policy with more strategies left.
if ARGV[5] == '1' then
  local limit, window = ARGV[6] + 0, ARGV[7] + 0
  local h = redis.call('HMGET', key, 's1', 'c1', 's2')
  local s, c = h[1], h[2]
  if s and c then
    s, c = s + 0, c + 0
    if now >= s and now - s >= window then s, c = false, 0 end
  else
    s, c = false, 0
  end
  local allowed = c + cost <= limit
  local retry = -1
  if not allowed and cost <= limit then retry = s + window - now end
  if allowed and cost > 0 then
    if s then c = c + cost else s, c = now, cost end
    if ARGV[3] ~= '1' then
      -- A window that starts now, or later (the clock stepped back), gets its
      -- fields and TTL written; inside a live window the count alone grows.
      if s >= now or h[3] then
        if h[3] then redis.call('DEL', key) end
        redis.call('HSET', key, 's1', string.format('%d', s), 'c1', string.format('%d', c))
        local ms = math.floor((s + window - now + 999) / 1000)
        if ARGV[4] ~= '0' then ms = ms + ARGV[4] end
        if ms < 1 then ms = 1 end
        redis.call('PEXPIRE', key, string.format('%d', ms))
      else
        redis.call('HINCRBY', key, 'c1', ARGV[2])
      end
    end
  end
  local remaining, reset = limit - c, 0
  if remaining < 0 then remaining = 0 end
  if s then reset = s + window - now end
  return {allowed and 1 or 0, limit, remaining, reset, retry, allowed and 0 or 1, now}
end

local k = ARGV[5] + 0

-- s<i>, c<i> for every strategy, and s<k+1>: present only if an earlier
-- policy under this name had more strategies, whose fields must go.
local fields = {}
for i = 1, k do
  fields[2 * i - 1], fields[2 * i] = 's' .. i, 'c' .. i
end
fields[2 * k + 1] = 's' .. (k + 1)
local h = redis.call('HMGET', key, unpack(fields))

local limits, windows, starts, counts = {}, {}, {}, {}
local violated, never, bit = 0, false, 1
for i = 1, k do
  local limit = ARGV[4 + 2 * i] + 0
  local window = ARGV[5 + 2 * i] + 0
  limits[i], windows[i] = limit, window
  local s, c = tonumber(h[2 * i - 1]), tonumber(h[2 * i])
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
local starting = false
local best_limit, best_rem, reset = 0, nil, 0
local quotas = {}
for i = 1, k do
  local s, c = starts[i], counts[i]
  if take then
    -- A window that starts later than now (the clock stepped back) ends
    -- later than its TTL says: rewrite, as for a window that starts.
    if s then c = c + cost else s, c = now, cost end
    if s >= now then starting = true end
    starts[i], counts[i] = s, c
  end
  local rem = limits[i] - c
  if rem < 0 then rem = 0 end
  if best_rem == nil or rem < best_rem then best_limit, best_rem = limits[i], rem end
  local e = 0
  if s then
    e = s + windows[i] - now
    if e > reset then reset = e end
    if e < 0 then e = 0 end
  end
  if k > 1 then quotas[2 * i - 1], quotas[2 * i] = rem, e end
end

if take and ARGV[3] ~= '1' then
  if starting or h[2 * k + 1] then
    if h[2 * k + 1] then redis.call('DEL', key) end
    local args = {}
    for i = 1, k do
      args[4 * i - 3], args[4 * i - 2] = 's' .. i, string.format('%d', starts[i])
      args[4 * i - 1], args[4 * i] = 'c' .. i, string.format('%d', counts[i])
    end
    redis.call('HSET', key, unpack(args))
    local ms = math.floor((reset + 999) / 1000) + ARGV[4]
    if ms < 1 then ms = 1 end
    redis.call('PEXPIRE', key, string.format('%d', ms))
  else
    for i = 1, k do
      redis.call('HINCRBY', key, 'c' .. i, ARGV[2])
    end
  end
end

local reply = {allowed and 1 or 0, best_limit, best_rem or 0, reset, retry, allowed and 0 or violated, now}
for i = 1, #quotas do reply[7 + i] = quotas[i] end
return reply
