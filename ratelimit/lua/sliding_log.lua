-- sliding_log.lua: an exact log of admitted hits, one entry per permit; a
-- hit at s counts for window W while now - s < W (half-open).
-- Twin: src/algo/sliding_log.rs.
--
-- Constants  local limits, windows = {<L_1>, ...}, {<W_1 µs>, ...}
-- KEYS, ARGV prelude.lua's.
-- Returns    the window reply (window.lua).
--
-- State (a sorted set of admitted hits): score = hit time µs, member
-- "<time>:<j>" with j = 0, 1, ... among the hits sharing that time
-- (trimming removes whole scores, so they are always "<time>:0" ..
-- "<time>:(m-1)"). Strategy i counts ZCOUNT (now - W_i, +inf]. Hits with
-- s <= now - widest are trimmed on the next write. Written only when
-- allowed, cost > 0 and not a peek, always followed by PEXPIRE to the reset.
-- The newest hit, read for the reset, also tells whether hits already share
-- this microsecond, so the common write needs no extra count.

local counts, by_window, widest = {}, {}, 0
for i = 1, k do
  local window = windows[i]
  if window > widest then widest = window end
  local c = by_window[window]
  if c == nil then
    c = redis.call('ZCOUNT', key, '(' .. string.format('%d', now - window), '+inf')
    by_window[window] = c
  end
  counts[i] = c
end
local violated, never = judge(counts)
local taken = violated == 0 and cost or 0

-- Reset: when the newest hit leaves the window; a call that takes adds
-- hits at now, which is the newest unless the clock stepped back.
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local newest_at = tonumber(newest[2])
local reset, ends = 0, {}
for i = 1, k do
  local e = 0
  if newest_at then
    e = newest_at + windows[i] - now
    if e < 0 then e = 0 end
  end
  if taken > 0 and e < windows[i] then e = windows[i] end
  ends[i] = e
  if e > reset then reset = e end
end

-- Retry (denials only): for a violated strategy with c counted hits, the
-- (c + cost - limit)-th oldest of them must leave its window; the counted
-- hits are the newest c of the set, so that hit is the (limit - cost + 1)-th
-- newest.
local retry = -1
if violated ~= 0 and not never then
  retry = 0
  for i = 1, k do
    if violates(violated, i) then
      local rank = string.format('%d', cost - limits[i] - 1)
      local hit = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
      local r = tonumber(hit[2]) + windows[i] - now
      if r > retry then retry = r end
    end
  end
end

if taken > 0 and not peek then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - widest))
  local at = string.format('%d', now)
  -- Hits at this very microsecond exist only if the newest is not older.
  local j = 0
  if newest_at and newest_at >= now then j = redis.call('ZCOUNT', key, at, at) end
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
  expire_after(reset)
end

return window_reply(violated, counts, taken, reset, retry, ends)
