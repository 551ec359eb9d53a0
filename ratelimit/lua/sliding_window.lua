-- sliding_window.lua: counts in sub-windows of `precision` P, aligned to
-- multiples of P; a strategy of window W sums the W/P most recent
-- sub-windows, the current one included. Twin: src/algo/sliding_window.rs.
--
-- Policy     policy_sliding_window.lua: precision, limits, windows, and
--            per strategy its span (W_i / P) and the widest.
-- Values     decide's (lua/README.md, "A call's values").
-- Returns    the window reply (window.lua).
--
-- State (one string): the signature `<dd` P, k then k spans (`<d` each),
-- the policy it was written under; then `<d` n, the newest sub-window
-- written (its index floor(t / P)), and k totals, strategy i's count over
-- (n - span_i, n]; then a ring of `widest` counts (`<d` each), sub-window j
-- at slot j % widest, holding j's count for n - widest < j <= n. So a call
-- reads one GET and writes one SET, and starts from the totals: when it is
-- later than n it subtracts the sub-windows that left each window since n
-- (each sub-window leaves once), never reading the whole window but to find
-- a denial's retry time.
--
-- A write records its time as the sub-window it counts in: a call is judged
-- at the start of n when now is earlier, so no call goes back before a
-- recorded one. Within one sub-window any time finds the same counts.
--
-- A state written under another signature (another precision, or other
-- windows) is read whole: each live sub-window counted at another
-- precision moves to the sub-window of P holding its last microsecond,
-- counts landing together merged, so no permit counts for less time than it
-- would have at P; a write then writes the key afresh under this policy.
--
-- Written only when allowed, cost > 0 and not a peek, as SET ... PX to the
-- reset; on Redis's clock a write within the sub-window n already recorded
-- (whose TTL already runs to that same reset) is SETRANGE key 0, which
-- keeps the TTL and replies an integer (a table for SET's OK).
local current = math.floor(now / precision)
local state = call('GET', key)
local head = #signature
local ring_at = head + 8 + 8 * k -- the ring's first byte, less one
local counts, newest, current_count = {}, nil, 0
-- The newest index the state records, when written under this policy.
local last = nil
-- Otherwise the live sub-windows as {index, count}, oldest first.
local entries = {}

-- Judges the call at sub-window `index` if it is later than now's.
local function catch_up(index)
  if index > current then
    current = index
    now = index * precision
  end
end

-- Sub-window j's count in this policy's ring (last - widest < j <= last).
local function slot(j)
  return (struct_unpack('<d', state, ring_at + 8 * (j % widest) + 1))
end

if state and #state == ring_at + 8 * widest and string.sub(state, 1, head) == signature then
  local totals = {struct_unpack(tail, state, head + 1)}
  last = totals[1]
  catch_up(last)
  local gap = current - last
  for i = 1, k do
    local c = 0
    if gap == 0 then
      c = totals[i + 1]
    elseif gap < spans[i] then
      -- Sub-windows (last - span_i, current - span_i] left the window.
      c = totals[i + 1]
      for j = last - spans[i] + 1, current - spans[i] do c = c - slot(j) end
    end
    counts[i] = c
  end
  if gap == 0 then current_count = slot(current) end
  if gap < widest then newest = last else last = nil end
else
  if state then
    -- Written under another policy: its live sub-windows, moved to P.
    local was, was_k = struct_unpack('<dd', state)
    local was_widest = 0
    for i = 1, was_k do
      local span = struct_unpack('<d', state, 9 + 8 * i)
      if span > was_widest then was_widest = span end
    end
    local was_last = struct_unpack('<d', state, 17 + 8 * was_k)
    local was_at = 24 + 16 * was_k
    local found = {}
    for j = was_last - was_widest + 1, was_last do
      local c = struct_unpack('<d', state, was_at + 8 * (j % was_widest) + 1)
      if c > 0 then
        local idx = j
        if was ~= precision then idx = math.floor(((j + 1) * was - 1) / precision) end
        local top = found[#found]
        if top and top[1] == idx then top[2] = top[2] + c else found[#found + 1] = {idx, c} end
      end
    end
    if #found > 0 then catch_up(found[#found][1]) end
    for j = 1, #found do
      if found[j][1] + widest > current then entries[#entries + 1] = found[j] end
    end
  end
  for i = 1, k do counts[i] = 0 end
  for j = 1, #entries do
    local idx, c = entries[j][1], entries[j][2]
    newest = idx
    if idx == current then current_count = c end
    for i = 1, k do
      if idx + spans[i] > current then counts[i] = counts[i] + c end
    end
  end
end

local violated, never = judge(counts)
local taken = violated == 0 and cost or 0
if taken > 0 and (newest == nil or newest < current) then newest = current end

-- The key's reset and each strategy's: sub-window `newest` leaves strategy i
-- at (newest + span_i) * P.
local reset, ends = 0, {}
for i = 1, k do
  local e = 0
  if newest ~= nil then
    e = (newest + spans[i]) * precision - now
    if e < 0 then e = 0 end
  end
  ends[i] = e
  if e > reset then reset = e end
end

-- Each violated strategy's retry: drop its sub-windows oldest first until
-- the cost fits.
local retry = -1
if violated ~= 0 and not never then
  retry = 0
  for i = 1, k do
    if violates(violated, i) then
      local left, passes_at = counts[i], (current + 1) * precision
      local function drop(j, c)
        left = left - c
        passes_at = (j + spans[i]) * precision
        return left + cost <= limits[i]
      end
      if last then
        for j = current - spans[i] + 1, math.min(current, last) do
          local c = slot(j)
          if c > 0 and drop(j, c) then break end
        end
      else
        for j = 1, #entries do
          local e = entries[j]
          if e[1] + spans[i] > current and drop(e[1], e[2]) then break end
        end
      end
      local r = passes_at - now
      retries[i] = r
      if r > retry then retry = r end
    end
  end
end

if taken > 0 and not peek then
  local totals = {}
  for i = 1, k do totals[i] = counts[i] + taken end
  local ring
  if last then
    -- Zero the sub-windows since `last` (they held ones that left every
    -- window), the current one's count last: contiguous slots, maybe wrapping.
    local bytes = struct_pack('<d', current_count + taken)
    local from = current
    if current > last then
      from = last + 1
      bytes = string.rep('\0', 8 * (current - from)) .. bytes
    end
    local at, len, size = 8 * (from % widest), #bytes, 8 * widest
    if at + len <= size then
      ring = string.sub(state, ring_at + 1, ring_at + at) .. bytes .. string.sub(state, ring_at + at + len + 1)
    else
      local fits = size - at
      ring = string.sub(bytes, fits + 1) .. string.sub(state, ring_at + len - fits + 1, ring_at + at)
        .. string.sub(bytes, 1, fits)
    end
  else
    local slots, zero = {}, string.rep('\0', 8)
    for j = 1, widest do slots[j] = zero end
    local counted = false
    for j = 1, #entries do
      local idx, c = entries[j][1], entries[j][2]
      if idx == current then
        c = c + taken
        counted = true
      end
      slots[idx % widest + 1] = struct_pack('<d', c)
    end
    if not counted then slots[current % widest + 1] = struct_pack('<d', taken) end
    ring = table.concat(slots)
  end
  local value = signature .. struct_pack(tail, current, unpack(totals)) .. ring
  if server_clock and last == current then
    call('SETRANGE', key, '0', value)
  else
    local ms = math.floor((reset + now - read_at + 999) / 1000) + slack
    if ms < 1 then ms = 1 end
    call('SET', key, value, 'PX', string.format('%d', ms))
  end
end

return window_reply(violated, counts, taken, reset, retry, ends)
