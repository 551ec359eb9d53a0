-- sub_windows.lua: joined after window.lua in both layouts of the sliding
-- window (sliding_window.lua, sliding_window_totals.lua): what they share.
--
-- Counts are kept in sub-windows of `precision` P (a constant, dividing
-- every window) aligned to multiples of P: a hash field per sub-window,
-- index floor(t / P) as a "%d" string -> its count. With current =
-- floor(now / P) and span_i = W_i / P, strategy i counts the fields with
-- current - span_i < index <= current. Fields with index + widest <= current
-- never count again; a write deletes those it finds.
--
-- A write records its time as the sub-window it counts in: a call is judged
-- at the start of the newest sub-window written when now is earlier
-- (`catch_up`), so no call goes back before a recorded one. Within one
-- sub-window any time finds the same counts.
--
-- Field "p" records the precision the fields were counted at ("P", or the
-- totals layout's "P:W_1:...:W_k"). Fields counted at another precision
-- are read as the sub-window holding their last microsecond (`moved`),
-- counts landing together merged, so no permit counts for less time than
-- it would have at P; a write then writes the key afresh (`rewrite`).
local current = math.floor(now / precision)
local spans, widest = {}, 0
for i = 1, k do
  spans[i] = math.floor(windows[i] / precision)
  if spans[i] > widest then widest = spans[i] end
end

-- Judges the call at sub-window `index` if it is later than now's.
local function catch_up(index)
  if index > current then
    current = index
    now = index * precision
  end
end

-- The precision field "p" (nil: none recorded) says the fields were counted at.
local function counted_at(p)
  local digits = p and string.match(p, '^%d+')
  return digits and tonumber(digits) or precision
end

-- Index `idx` of a sub-window counted at precision `was`, as an index at P.
local function moved(idx, was)
  if was == precision then return idx end
  return math.floor(((idx + 1) * was - 1) / precision)
end

-- Reads every field of `raw` (HGETALL's reply), moved to P and first
-- catching up with the newest index: the counts per strategy, the newest
-- live index (nil if none), the live entries as {index, count}, the current
-- sub-window's count, the fields to delete (dead ones, and those that are
-- neither an index nor "p" for which `drop(field)` says so) and whether the
-- fields were counted at another precision.
local function recount(raw, drop)
  local was = precision
  for j = 1, #raw, 2 do
    if raw[j] == 'p' then was = counted_at(raw[j + 1]) end
  end
  local found = {}
  for j = 1, #raw, 2 do
    local idx, c = tonumber(raw[j]), tonumber(raw[j + 1])
    if idx and c then
      idx = moved(idx, was)
      catch_up(idx)
      found[#found + 1] = {idx, c, raw[j]}
    end
  end
  local counts, newest, entries, current_count, stale = {}, nil, {}, 0, {}
  local at = {} -- index -> its entry, where counts moved together merge
  for i = 1, k do counts[i] = 0 end
  for j = 1, #found do
    local idx, c = found[j][1], found[j][2]
    if idx + widest <= current then
      stale[#stale + 1] = found[j][3]
    else
      if newest == nil or idx > newest then newest = idx end
      if at[idx] then
        at[idx][2] = at[idx][2] + c
      else
        at[idx] = {idx, c}
        entries[#entries + 1] = at[idx]
      end
      if idx == current then current_count = current_count + c end
      for i = 1, k do
        if idx + spans[i] > current then counts[i] = counts[i] + c end
      end
    end
  end
  for j = 1, #raw, 2 do
    if raw[j] ~= 'p' and not (tonumber(raw[j]) and tonumber(raw[j + 1])) and drop(raw[j]) then
      stale[#stale + 1] = raw[j]
    end
  end
  return counts, newest, entries, current_count, stale, was ~= precision
end

-- Strategy i's retry time from its live entries (any order): drop its
-- sub-windows oldest first until the cost fits.
local function retry_from_entries(entries, counts, i)
  table.sort(entries, function(a, b) return a[1] < b[1] end)
  local left, passes_at = counts[i], (current + 1) * precision
  for j = 1, #entries do
    local e = entries[j]
    if e[1] + spans[i] > current then
      left = left - e[2]
      passes_at = (e[1] + spans[i]) * precision
      if left + cost <= limits[i] then break end
    end
  end
  return passes_at - now
end

-- The key's reset and each strategy's, once `newest` is the newest index
-- after the call: its sub-window leaves strategy i at (newest + span_i) * P.
local function resets(newest)
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
  return reset, ends
end

-- Deletes `fields`, at most a thousand per command.
local function delete_fields(fields)
  for j = 1, #fields, 1000 do
    call('HDEL', key, unpack(fields, j, math.min(j + 999, #fields)))
  end
end

-- Writes the key afresh at P: the live `entries`, the current sub-window's
-- count raised by `taken`, then `extra` (field, value, ...); at most five
-- hundred fields per command.
local function rewrite(entries, taken, extra)
  call('DEL', key)
  local values, counted = {}, false
  for j = 1, #entries do
    local idx, c = entries[j][1], entries[j][2]
    if idx == current then
      c = c + taken
      counted = true
    end
    values[#values + 1] = string.format('%d', idx)
    values[#values + 1] = string.format('%d', c)
  end
  if not counted then
    values[#values + 1] = string.format('%d', current)
    values[#values + 1] = string.format('%d', taken)
  end
  for j = 1, #extra do values[#values + 1] = extra[j] end
  for j = 1, #values, 1000 do
    call('HSET', key, unpack(values, j, math.min(j + 999, #values)))
  end
end
