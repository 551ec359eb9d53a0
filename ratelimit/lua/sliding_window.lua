-- sliding_window.lua: counts in sub-windows of `precision` P, aligned to
-- multiples of P; a strategy of window W sums the W/P most recent
-- sub-windows, the current one included. Twin: src/algo/sliding_window.rs.
--
-- Policy     policy_sliding_window.lua: precision, limits, windows, and
--            per strategy its span (W_i / P), and the widest.
-- Values     decide's (lua/README.md, "A call's values").
-- Returns    the window reply (window.lua).
--
-- State (one string of little-endian doubles): k, n (the newest sub-window
-- written, its index floor(t / P)), x (the ms of Redis's clock its TTL runs
-- to at least, -1 when unknown); then the policy's numbers it was written
-- under, as sent (P, then L_i, W_i); then k totals, strategy i's count over
-- (n - span_i, n]; then a ring of `widest` counts, sub-window j at slot
-- j % widest, holding j's count for n - widest < j <= n. So a call starts
-- from the totals: when it is later than n it subtracts the sub-windows
-- that left each window since n (each sub-window leaves once), never
-- reading a whole window but to find a denial's retry time.
--
-- A write records its time as the sub-window it counts in: a call is judged
-- at the start of n when now is earlier, so no call goes back before a
-- recorded one. Within one sub-window any time finds the same counts.
--
-- A state written under other numbers (another precision, other windows or
-- limits) is read whole: each live sub-window counted at another precision
-- moves to the sub-window of P holding its last microsecond, counts landing
-- together merged, so no permit counts for less time than it would have at
-- P; a write then writes the key afresh under this policy.
--
-- Written only when allowed, cost > 0 and not a peek. On Redis's clock,
-- when x already covers the reset, the TTL is kept; else it moves to the
-- reset plus up to a second (at most the widest window), recorded in x, so
-- a steady key sets its TTL about once a second and lives at most a second
-- past its reset. On a client's clock the TTL is always the reset plus the
-- slack, x = -1.
--
-- Redis's Lua hashes every byte of each string it makes, so a call brings
-- into Lua only the bytes it needs. A ring of few sub-windows (`whole`,
-- policy_sliding_window.lua) is read whole (GET) and written whole (SETRANGE key 0, keeping the TTL,
-- or SET ... PX): one read and one write of a few hundred bytes. A larger
-- ring is never read whole but for a denial's retry time or a state
-- written under other numbers: the call reads the head and totals and the
-- sub-windows it subtracts (GETRANGE), and writes the head and totals and
-- the sub-windows it changes (SETRANGE), with PEXPIRE when the TTL moves,
-- so its bytes and commands do not grow with the ring.
local current = math.floor(now / precision)
-- The whole state, or for a larger ring its head and totals (GETRANGE of
-- a missing key is empty).
local state
if whole then
  state = call('GET', key)
else
  state = call('GETRANGE', key, '0', string.format('%d', ring_at - 1))
  if state == '' then state = false end
end

local counts, newest, current_count = {}, nil, 0
-- n and x, when the state was written under this policy's numbers.
local last, expires = nil, -1
-- Otherwise the live sub-windows as {index, count}, oldest first.
local entries = {}

if state and #state == (whole and ring_at + 8 * widest or ring_at) and string.sub(state, 25, totals_at) == policy then
  local _
  _, last, expires = struct_unpack('<ddd', state)
  -- Judged at sub-window n if it is later than now's.
  if last > current then
    current = last
    now = last * precision
  end
  local gap = current - last
  for i = 1, k do
    local c = 0
    if gap < spans[i] then
      -- Sub-windows (n - span_i, current - span_i] left the window.
      c = struct_unpack('<d', state, totals_at + 8 * i - 7)
      if gap > 0 then
        local left, at = ring(state, key, last - spans[i] + 1, current - spans[i])
        for byte = at, at + 8 * (gap - 1), 8 do c = c - struct_unpack('<d', left, byte) end
      end
    end
    counts[i] = c
  end
  if gap == 0 then current_count = struct_unpack('<d', ring(state, key, current, current)) end
  if gap < widest then newest = last else last = nil end
else
  -- Written under other numbers: read whole, its live sub-windows moved
  -- to P.
  if state and not whole then state = call('GET', key) end
  if state then
    local was_k, was_last = struct_unpack('<dd', state)
    local was = struct_unpack('<d', state, 25)
    local was_widest = 0
    for i = 1, was_k do
      local span = math.floor(struct_unpack('<d', state, 25 + 16 * i) / was)
      if span > was_widest then was_widest = span end
    end
    local was_at = 32 + 24 * was_k
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
    local top = found[#found]
    if top and top[1] > current then
      current = top[1]
      now = current * precision
    end
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

-- The key's reset and, with several strategies, each one's: sub-window
-- `newest` leaves strategy i at (newest + span_i) * P.
local reset, ends = 0, nil
if k > 1 then ends = {} end
if newest ~= nil then
  for i = 1, k do
    local e = (newest + spans[i]) * precision - now
    if e < 0 then e = 0 end
    if ends then ends[i] = e end
    if e > reset then reset = e end
  end
elseif ends then
  for i = 1, k do ends[i] = 0 end
end

-- Each violated strategy's retry: drop its sub-windows oldest first until
-- the cost fits.
local retry = -1
if violated ~= 0 and not never then
  retry = 0
  for i = 1, k do
    if violates(violated, i) then
      local left, passes_at, limit = counts[i], (current + 1) * precision, limits[i]
      if last then
        local from, to = current - spans[i] + 1, math.min(current, last)
        local counted, at = '', 1
        if to >= from then counted, at = ring(state, key, from, to) end
        for j = from, to do
          local c = struct_unpack('<d', counted, at + 8 * (j - from))
          if c > 0 then
            left = left - c
            passes_at = (j + spans[i]) * precision
            if left + cost <= limit then break end
          end
        end
      else
        for j = 1, #entries do
          local e = entries[j]
          if e[1] + spans[i] > current then
            left = left - e[2]
            passes_at = (e[1] + spans[i]) * precision
            if left + cost <= limit then break end
          end
        end
      end
      local r = passes_at - now
      retries[i] = r
      if r > retry then retry = r end
    end
  end
end

if taken > 0 and not peek then
  local ms = math.floor((reset + now - read_at + 999) / 1000) + slack
  if ms < 1 then ms = 1 end
  local kept = server_clock and last and expires >= read_at / 1000 + ms
  if not kept then
    if server_clock then
      ms = ms + math.min(math.floor(widest * precision / 1000), 1000)
      expires = math.floor(read_at / 1000) + ms
    else
      expires = -1
    end
  end
  local totals
  if k == 1 then
    totals = struct_pack('<d', counts[1] + taken)
  else
    totals = {}
    for i = 1, k do totals[i] = struct_pack('<d', counts[i] + taken) end
    totals = table.concat(totals)
  end
  local top = struct_pack('<ddd', k, current, expires)
  if last then
    -- The sub-windows after n get 0 (their slots held ones that left every
    -- window), the current one its count: contiguous slots, maybe wrapping.
    local bytes, from = struct_pack('<d', current_count + taken), current
    if current > last + 1 then bytes = string.rep('\0', 8 * (current - last - 1)) .. bytes end
    if current > last then from = last + 1 end
    local at, len, size = 8 * (from % widest), #bytes, 8 * widest
    if whole then
      local value
      if at + len <= size then
        value = top .. policy .. totals .. string.sub(state, ring_at + 1, ring_at + at) .. bytes
          .. string.sub(state, ring_at + at + len + 1)
      else
        local fits = size - at
        value = top .. policy .. totals .. string.sub(bytes, fits + 1)
          .. string.sub(state, ring_at + len - fits + 1, ring_at + at) .. string.sub(bytes, 1, fits)
      end
      if kept then call('SETRANGE', key, '0', value) else call('SET', key, value, 'PX', string.format('%d', ms)) end
    else
      call('SETRANGE', key, '0', top .. policy .. totals)
      if at + len <= size then
        call('SETRANGE', key, string.format('%d', ring_at + at), bytes)
      else
        local fits = size - at
        call('SETRANGE', key, string.format('%d', ring_at + at), string.sub(bytes, 1, fits))
        call('SETRANGE', key, string.format('%d', ring_at), string.sub(bytes, fits + 1))
      end
      if not kept then call('PEXPIRE', key, string.format('%d', ms)) end
    end
  elseif whole or #entries > 0 then
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
    call('SET', key, top .. policy .. totals .. table.concat(slots), 'PX', string.format('%d', ms))
  else
    -- A larger ring afresh: the head, the ring's last slot (Redis pads the
    -- bytes before it with zeros), then the one count.
    call('SET', key, top .. policy .. totals, 'PX', string.format('%d', ms))
    call('SETRANGE', key, string.format('%d', ring_at + 8 * widest - 8), string.rep('\0', 8))
    call('SETRANGE', key, string.format('%d', ring_at + 8 * (current % widest)), struct_pack('<d', taken))
  end
end

return window_reply(violated, counts, taken, reset, retry, ends)
