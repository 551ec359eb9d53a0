-- sliding_log.lua: an exact log of admitted calls, one entry per call (not
-- per permit), so a call's work never depends on its cost: a few commands,
-- O(log n) each in the entries n, and at most O(n) to trim or (rarely)
-- renumber them. An entry at s counts for window W while now - s < W
-- (half-open). Twin: src/algo/sliding_log.rs.
--
-- Policy     local limits, windows = {<L_1>, ...}, {<W_1 µs>, ...}  (policy_windows.lua)
-- Values     decide's (lua/README.md, "A call's values").
-- Returns    the window reply (window.lua).
--
-- State (a sorted set of entries): score = the µs the call was admitted at,
-- member = "<before>:<weight>": its permits, and the weight of every entry
-- before it since the log started (a running total). Scores strictly
-- increase, and so do running totals: a call is judged at the newest
-- entry's time if now is earlier (clock.lua), and a call admitted at the
-- newest entry's very µs joins that entry. Strategy i counts total -
-- before of the oldest entry with s > now - W_i, total being the newest's
-- before + weight. Entries with s <= now - widest are trimmed on the next
-- write. Written only when allowed, cost > 0 and not a peek, always
-- followed by PEXPIRE to the reset.
--
-- At most `max_entries` entries (src/algo/sliding_log.rs, MAX_ENTRIES): a
-- call admitted when the log is full joins the newest entry, which takes
-- the call's time, so that weight counts until the later call leaves: a
-- full log errs toward denying. When the oldest running total reaches
-- 2^48, every entry's is lowered by it, keeping totals exact in doubles.
local max_entries = 1000
local rebase_from = 2 ^ 48

-- An entry's running total before it and its weight.
local function entry(member)
  local before, weight = string.match(member, '^(%d+):(%d+)$')
  return tonumber(before), tonumber(weight)
end

local function member(before, weight)
  return string.format('%d:%d', before, weight)
end

local widest = 0
for i = 1, k do
  if windows[i] > widest then widest = windows[i] end
end

local newest = call('ZRANGE', key, -1, -1, 'WITHSCORES')
local newest_at, newest_before, newest_weight = tonumber(newest[2]), 0, 0
local total = 0
if newest_at then
  newest_before, newest_weight = entry(newest[1])
  total = newest_before + newest_weight
  if newest_at > now then now = newest_at end
end
-- Whether some entry is still in the widest window.
local alive = newest_at and newest_at + widest > now

local counts, by_window = {}, {}
for i = 1, k do
  local window = windows[i]
  local c = by_window[window]
  if c == nil then
    c = 0
    if newest_at and newest_at + window > now then
      local first = call('ZRANGEBYSCORE', key, '(' .. string.format('%d', now - window), '+inf', 'LIMIT', 0, 1)
      c = total - entry(first[1])
    end
    by_window[window] = c
  end
  counts[i] = c
end
local violated, never = judge(counts)
local taken = violated == 0 and cost or 0

-- Reset: when the newest entry leaves the window; a call that takes is
-- the newest, at now.
local reset, ends = 0, {}
for i = 1, k do
  local e = 0
  if taken > 0 then
    e = windows[i]
  elseif alive then
    e = newest_at + windows[i] - now
    if e < 0 then e = 0 end
  end
  ends[i] = e
  if e > reset then reset = e end
end

-- Retry (denials only): for a violated strategy, the weight up to the
-- running total total + cost - L_i must leave; the entry holding it (the
-- first whose before + weight reaches it, found by bisecting the ranks)
-- leaves at its time + W_i.
local retry = -1
if violated ~= 0 and not never then
  retry = 0
  local size = call('ZCARD', key)
  for i = 1, k do
    if violates(violated, i) then
      local must_leave = total + cost - limits[i]
      local lo, hi = 0, size - 1
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        local before, weight = entry(call('ZRANGE', key, mid, mid)[1])
        if before + weight >= must_leave then hi = mid else lo = mid + 1 end
      end
      local hit = call('ZRANGE', key, lo, lo, 'WITHSCORES')
      local r = tonumber(hit[2]) + windows[i] - now
      retries[i] = r
      if r > retry then retry = r end
    end
  end
end

if taken > 0 and not peek then
  local at = string.format('%d', now)
  call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - widest))
  -- written: the running total before the entry this call wrote.
  local written = 0
  if alive and (newest_at == now or call('ZCARD', key) >= max_entries) then
    written = newest_before
    call('ZREM', key, newest[1])
    call('ZADD', key, at, member(written, newest_weight + taken))
  else
    if alive then written = total end
    call('ZADD', key, at, member(written, taken))
  end
  -- The oldest entry's total is at most the newest's: read only if needed.
  local base = 0
  if written >= rebase_from then base = entry(call('ZRANGE', key, 0, 0)[1]) end
  if base >= rebase_from then
    local all = call('ZRANGE', key, 0, -1, 'WITHSCORES')
    call('DEL', key)
    for j = 1, #all, 1000 do
      local args = {}
      for m = j, math.min(j + 999, #all), 2 do
        local before, weight = entry(all[m])
        args[#args + 1] = all[m + 1]
        args[#args + 1] = member(before - base, weight)
      end
      call('ZADD', key, unpack(args))
    end
  end
  expire_after(reset)
end

return window_reply(violated, counts, taken, reset, retry, ends)
