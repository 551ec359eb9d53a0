-- sliding_log.lua: an exact log of admitted hits, one entry per permit; a
-- hit at s counts for window W while now - s < W (half-open).
-- Twin: src/algo/sliding_log.rs.
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
-- State on Redis: a sorted set of admitted hits; score = hit time µs, member
-- "<time>:<j>" with j = 0, 1, ... among the hits sharing that time (trimming
-- removes whole scores, so they are always "<time>:0".."<time>:(m-1)").
-- Strategy i counts ZCOUNT (now - W_i, +inf]. Hits with s <= now - widest
-- are trimmed on the next write. Written only when allowed, cost > 0 and not
-- a peek, always followed by PEXPIRE ceil(reset_after_us / 1000) + slack ms.
-- The newest hit, read for reset_after, also tells whether hits already
-- share this microsecond, so the common write needs no extra count (issue 6).

local k = ARGV[5] + 0

local limits, windows, counts = {}, {}, {}
local by_window = {}
local widest = 0
local violated, never, bit = 0, false, 1
for i = 1, k do
  local limit = ARGV[4 + 2 * i] + 0
  local window = ARGV[5 + 2 * i] + 0
  limits[i], windows[i] = limit, window
  if window > widest then widest = window end
  local c = by_window[window]
  if c == nil then
    c = redis.call('ZCOUNT', key, '(' .. string.format('%d', now - window), '+inf')
    by_window[window] = c
  end
  counts[i] = c
  if cost > limit then never = true end
  if c + cost > limit then violated = violated + bit end
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

-- Reset: when the newest hit leaves the widest window; a call that takes
-- adds hits at now, which is the newest unless the clock stepped back.
local reset = 0
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local newest_at = tonumber(newest[2])
if newest_at then
  reset = newest_at + widest - now
  if reset < 0 then reset = 0 end
end
if taken > 0 and reset < widest then reset = widest end
-- Per strategy (k > 1): the same, for its own window.
local quotas = {}
if k > 1 then
  for i = 1, k do
    local rem = limits[i] - (counts[i] + taken)
    if rem < 0 then rem = 0 end
    local e = 0
    if newest_at then
      e = newest_at + windows[i] - now
      if e < 0 then e = 0 end
    end
    if taken > 0 and e < windows[i] then e = windows[i] end
    quotas[2 * i - 1], quotas[2 * i] = rem, e
  end
end

-- Retry (denials only): for a violated strategy with c counted hits, the
-- (c + cost - limit)-th oldest of them must leave its window; the counted hits
-- are the newest c of the set, so that hit is the (limit - cost + 1)-th newest.
local retry = -1
if not allowed and not never then
  retry = 0
  bit = 1
  for i = 1, k do
    if violated % (bit * 2) >= bit then
      local rank = string.format('%d', cost - limits[i] - 1)
      local hit = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
      local r = tonumber(hit[2]) + windows[i] - now
      if r > retry then retry = r end
    end
    bit = bit * 2
  end
end

if taken > 0 and ARGV[3] ~= '1' then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - widest))
  local at = string.format('%d', now)
  -- Hits at this very microsecond exist only if the newest is not older.
  local j = 0
  if newest_at and newest_at >= now then j = redis.call('ZCOUNT', key, at, at) end
  if taken == 1 then
    redis.call('ZADD', key, at, at .. ':' .. j)
  else
    local last = j + taken - 1
    while j <= last do
      local args = {}
      local stop = math.min(j + 499, last)
      for m = j, stop do
        args[#args + 1] = at
        args[#args + 1] = at .. ':' .. m
      end
      redis.call('ZADD', key, unpack(args))
      j = stop + 1
    end
  end
  local ms = math.floor((reset + 999) / 1000) + ARGV[4]
  if ms < 1 then ms = 1 end
  redis.call('PEXPIRE', key, string.format('%d', ms))
end

local reply = {allowed and 1 or 0, best_limit, best_rem or 0, reset, retry, allowed and 0 or violated, now}
for i = 1, #quotas do reply[7 + i] = quotas[i] end
return reply
