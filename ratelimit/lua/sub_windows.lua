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

-- Reads every field of `raw` (HGETALL's reply), first catching up with the
-- newest index: the counts per strategy, the newest live index (nil if
-- none), the live entries as {index, count}, the current sub-window's count
-- and the fields to delete: dead ones, and those that are not an index for
-- which `drop(field)` says so.
local function recount(raw, drop)
  for j = 1, #raw, 2 do
    local idx = tonumber(raw[j])
    if idx and tonumber(raw[j + 1]) then catch_up(idx) end
  end
  local counts, newest, entries, current_count, stale = {}, nil, {}, 0, {}
  for i = 1, k do counts[i] = 0 end
  for j = 1, #raw, 2 do
    local idx, c = tonumber(raw[j]), tonumber(raw[j + 1])
    if idx and c then
      if idx + widest <= current then
        stale[#stale + 1] = raw[j]
      else
        if newest == nil or idx > newest then newest = idx end
        entries[#entries + 1] = {idx, c}
        if idx == current then current_count = c end
        for i = 1, k do
          if idx + spans[i] > current then counts[i] = counts[i] + c end
        end
      end
    elseif drop(raw[j]) then
      stale[#stale + 1] = raw[j]
    end
  end
  return counts, newest, entries, current_count, stale
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
