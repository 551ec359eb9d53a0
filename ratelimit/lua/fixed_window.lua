-- fixed_window.lua: per strategy, a window of W started by the first admitted
-- hit after the previous window ended, or, for a calendar strategy, the
-- day, week, month or year of its zone holding the call, whose bounds the
-- client sends (opens[i], opens[i] + windows[i]); pass iff every strategy
-- has count + cost <= limit. Twin: src/algo/fixed_window.rs.
--
-- Policy     local limits, windows, opens = {<L_1>, ...}, {<W_1 µs>, ...},
--            {<calendar start µs or nil>, ...}  (policy_windows.lua)
-- Values     decide's (lua/README.md, "A call's values").
-- Returns    the window reply (window.lua).
--
-- State (a hash): for strategy i (1-based) "s<i>" = window start µs, "c<i>"
-- = count in that window, "w<i>" = its length (µs) under the policy that
-- last wrote it. The call is judged at the latest start if now is
-- earlier (clock.lua), so a window covers now iff now < its end
-- (half-open): start + W, or for a calendar strategy (`ends_at`) the
-- calendar window's end if it began inside it, none if it began before
-- (it ended), and start + its "w<i>" if it began after (a client clock
-- behind the one that wrote it). A calendar window starts at its bound,
-- not at the call, and records its own length (a day's follows the clock
-- changes). Written only when allowed, cost > 0 and not a peek; by a
-- denied check (cost within every limit) under a window longer than a
-- running one's "w<i>": that window runs on by the longer, so "w<i>" takes
-- it and the TTL its end, unless a window the key holds ends later; and by
-- a refund, which lowers by cost, never below zero, the count of each
-- window still running that counted the refunded call, taken at `taken`
-- (its start <= taken < start + W), then replies as a check of cost 0
-- (HSET of those counts; the TTL already covers their ends). A window
-- that ended, or began after the refunded call's ended, gives nothing
-- back: it holds none of that call's permits. A charge counts its cost
-- in every running window (starting those that run none) whatever the
-- room, past the limit, as an admitted call does, then replies as a check
-- of cost 0. A write that starts any
-- window, or meets another form or length, rewrites every field, then
-- sets the TTL to the latest window's end; a write inside live windows of
-- the policy's lengths only adds the cost to each count (HINCRBY), the
-- TTL already covering the latest window's end. A call inside live
-- windows needs no time recorded: judged at any time from the latest
-- start on, it finds the same windows.
--
-- Windows beyond the policy's k ("s<k+1>" on: an earlier policy of this
-- name had more strategies) are kept: each runs by its own "w<j>", never
-- judges, and counts every admitted call while it runs (the same add), so
-- a policy regaining that strategy finds every call made since. A refund
-- lowers them by the same rule. A write keeps them all but the trailing
-- ones that ended, and the TTL covers the last one's end. Read whole
-- (HGETALL) only when "s<k+1>" exists.
--
-- The key may instead hold fixed_window_counter.lua's integer (the same
-- key: a policy of this name with one strategy, on Redis's clock), W' *
-- 2^21 + count: it is the first strategy's window, taken to start W'
-- before the counter's TTL surely ends (never after now), the other
-- strategies having none. A refund lowers it by the counter's rule (SET
-- ... KEEPTTL); a write turns it into this hash.

-- The counter's unit of window (fixed_window_counter.lua's).
local per_ms = 2097152

-- When a window of strategy i that began at s, recorded with length w, ends
-- at this call (src/algo/fixed_window.rs, `Rule::end`).
local function ends_at(i, s, w)
  local from = opens[i]
  if not from then return s + windows[i] end
  if s < from then return s end
  if s < from + windows[i] then return from + windows[i] end
  return s + w
end

-- s<i>, c<i>, w<i> for every strategy, and s<k+1>: present only if an
-- earlier policy under this name had more strategies, whose windows run on.
local fields = {}
for i = 1, k do
  fields[3 * i - 2], fields[3 * i - 1], fields[3 * i] = 's' .. i, 'c' .. i, 'w' .. i
end
fields[3 * k + 1] = 's' .. (k + 1)
local h = try('HMGET', key, unpack(fields))
-- The counter's form: HMGET fails on it, having read nothing.
local counter = h.err and tonumber(call('GET', key))
local written = 0
if h.err then
  h = {}
  if counter then
    written = math.floor(counter / per_ms)
    counter = counter - written * per_ms
    -- No TTL (-1): as a window starting now, as the counter takes it.
    local t, s = call('PTTL', key) + 1, now
    if t > 0 then s = read_at + t * 1000 - written * 1000 end
    if s > now then s = now end
    h[1], h[2], h[3] = s, counter, written * 1000
  end
end

-- The windows beyond k: {start, count, length} per index, from k + 1 on.
local kept, last = {}, k
if h[3 * k + 1] then
  local all, f = call('HGETALL', key), {}
  for i = 1, #all, 2 do f[all[i]] = tonumber(all[i + 1]) end
  while f['s' .. (last + 1)] do
    last = last + 1
    kept[last] = {f['s' .. last], f['c' .. last] or 0, f['w' .. last] or 0}
  end
end
for j = k + 1, last do
  if kept[j][1] > now then now = kept[j][1] end
end

for i = 1, k do
  local s, c = tonumber(h[3 * i - 2]), tonumber(h[3 * i - 1])
  if s and c and s > now then now = s end
end
-- Whether each kept window runs at now.
local runs = {}
for j = k + 1, last do
  runs[j] = now - kept[j][1] < kept[j][3]
end
-- The running windows: start, count and the length each runs by.
local starts, counts, lens = {}, {}, {}
for i = 1, k do
  local s, c = tonumber(h[3 * i - 2]), tonumber(h[3 * i - 1])
  local e = s and c and ends_at(i, s, tonumber(h[3 * i]) or 0)
  if e and now < e then
    starts[i], counts[i], lens[i] = s, c, e - s
  else
    starts[i], counts[i] = false, 0
  end
end
if refund and counter then
  local _, window_end = struct_unpack('<dd', permit)
  -- fixed_window_counter.lua's margin, for a window timed to the ms.
  if starts[1] and read_at + 2000 < window_end and cost > 0 and counts[1] > 0 then
    if cost >= counts[1] then counts[1] = 0 else counts[1] = counts[1] - cost end
    call('SET', key, string.format('%d', written * per_ms + counts[1]), 'KEEPTTL')
  end
  cost = 0
elseif refund then
  local taken = struct_unpack('<d', permit)
  local args = {}
  for i = 1, k do
    local s = starts[i]
    if s and s <= taken and taken - s < lens[i] and cost > 0 and counts[i] > 0 then
      if cost >= counts[i] then counts[i] = 0 else counts[i] = counts[i] - cost end
      local j = #args
      args[j + 1], args[j + 2] = 'c' .. i, string.format('%d', counts[i])
    end
  end
  for j = k + 1, last do
    local s, c = kept[j][1], kept[j][2]
    if runs[j] and s <= taken and taken - s < kept[j][3] and cost > 0 and c > 0 then
      if cost >= c then c = 0 else c = c - cost end
      local n = #args
      args[n + 1], args[n + 2] = 'c' .. j, string.format('%d', c)
    end
  end
  if #args > 0 then call('HSET', key, unpack(args)) end
  cost = 0
end
local violated, never = judge(counts)
local allowed = violated == 0
local taken = allowed and cost or 0
-- A charge takes its cost whatever the room, at most 2^52 at once
-- (algo::charged), counted past the limit.
if charge then
  taken = cost
  if taken > 4503599627370496 then taken = 4503599627370496 end
end

-- The windows after the call (as if taken, also for a peek).
local starting = false
local reset, ends, after = 0, {}, {}
for i = 1, k do
  local s = starts[i]
  if taken > 0 and not s then
    s = opens[i] or now
    lens[i] = ends_at(i, s, 0) - s
    starting = true
  end
  after[i] = s
  local e = 0
  if s then
    e = s + lens[i] - now
    if e > reset then reset = e end
    if e < 0 then e = 0 end
  end
  ends[i] = e
end

if taken > 0 and not peek then
  local same = true
  for i = 1, k do
    if tonumber(h[3 * i]) ~= lens[i] then same = false end
  end
  if starting or last > k or counter or not same then
    -- The kept windows up to the last that runs, each counting the call.
    local keep, until_us = k, reset
    for j = k + 1, last do
      if runs[j] then
        keep = j
        local e = kept[j][1] + kept[j][3] - now
        if e > until_us then until_us = e end
      end
    end
    if last > k or counter then call('DEL', key) end
    local args = {}
    for i = 1, k do
      local n = #args
      args[n + 1], args[n + 2] = 's' .. i, string.format('%d', after[i])
      args[n + 3], args[n + 4] = 'c' .. i, string.format('%d', counts[i] + taken)
      args[n + 5], args[n + 6] = 'w' .. i, string.format('%d', lens[i])
    end
    for j = k + 1, keep do
      local c = kept[j][2]
      if runs[j] then c = c + taken end
      local n = #args
      args[n + 1], args[n + 2] = 's' .. j, string.format('%d', kept[j][1])
      args[n + 3], args[n + 4] = 'c' .. j, string.format('%d', c)
      args[n + 5], args[n + 6] = 'w' .. j, string.format('%d', kept[j][3])
    end
    call('HSET', key, unpack(args))
    expire_after(until_us)
  else
    local by = string.format('%d', taken)
    for i = 1, k do
      call('HINCRBY', key, 'c' .. i, by)
    end
  end
end

-- A charge replies as a check of cost 0 on the windows it wrote.
if charge then
  for i = 1, k do
    if after[i] then starts[i], counts[i] = after[i], counts[i] + taken end
  end
  cost, taken = 0, 0
  violated, never = judge(counts)
  allowed = violated == 0
end

-- Retry (denials only, from the windows before the call, or a
-- charge's after it): when every
-- violated strategy's window has ended.
local retry = -1
if not allowed and not never then
  retry = 0
  for i = 1, k do
    if violates(violated, i) and starts[i] then
      local e = starts[i] + lens[i] - now
      retries[i] = e
      if e > retry then retry = e end
    end
  end
end

-- A denied check by a window longer than a running one's own length: that
-- window runs on by the longer, so the key is kept to its end (the twin's
-- rule: the TTL moves only if every window the key holds ends by then).
if not allowed and not peek and not refund and not charge and cost > 0 and not never then
  local args, lengths = {}, {}
  for i = 1, k do
    lengths[i] = tonumber(h[3 * i]) or 0
    if starts[i] and lengths[i] < lens[i] then
      lengths[i] = lens[i]
      args[#args + 1], args[#args + 2] = 'w' .. i, string.format('%d', lens[i])
    end
  end
  if #args > 0 then
    if counter then
      -- The counter becomes this hash: its one window, by the longer length.
      call('DEL', key)
      args = {'s1', string.format('%d', starts[1]), 'c1', string.format('%d', counts[1]), 'w1', args[2]}
    end
    call('HSET', key, unpack(args))
    local within = true
    for i = 1, k do
      local s = tonumber(h[3 * i - 2])
      if s and now - s < lengths[i] and s + lengths[i] > now + reset then within = false end
    end
    for j = k + 1, last do
      if runs[j] and kept[j][1] + kept[j][3] > now + reset then within = false end
    end
    if within then expire_after(reset) end
  end
end

return window_reply(violated, counts, taken, reset, retry, ends)
