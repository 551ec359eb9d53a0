-- sliding_window.lua: counts in sub-windows of `precision` P; a strategy of
-- window W sums the W/P most recent sub-windows, the current one included.
-- Twin: src/algo/sliding_window.rs. This is the hash layout: every call
-- reads every field, so the runtime uses it while windows hold few
-- sub-windows, and sliding_window_totals.lua beyond.
--
-- Policy     local precision, limits, windows = <P µs>, {<L_1>, ...}, {<W_1 µs>, ...}
-- Values     decide's (lua/README.md, "A call's values").
-- Returns    the window reply (window.lua).
--
-- State (a hash): sub_windows.lua's fields, and "p" = the precision P.
-- Written only when allowed, cost > 0 and not a peek (the current field
-- and "p", HDEL of dead ones; the whole key afresh when the fields were
-- counted at another precision), always followed by PEXPIRE to the reset.
-- A write deletes the totals layout's other fields: its totals would miss
-- this script's writes, and so the two layouts can follow each other on a
-- key.

local raw = call('HGETALL', key)
local counts, newest, entries, current_count, stale, converted = recount(raw, function() return true end)
local violated, never = judge(counts)
local taken = violated == 0 and cost or 0

if taken > 0 and (newest == nil or newest < current) then newest = current end
local reset, ends = resets(newest)

local retry = -1
if violated ~= 0 and not never then
  retry = 0
  for i = 1, k do
    if violates(violated, i) then
      local r = retry_from_entries(entries, counts, i)
      retries[i] = r
      if r > retry then retry = r end
    end
  end
end

if taken > 0 and not peek then
  local p = string.format('%d', precision)
  if converted then
    rewrite(entries, taken, {'p', p})
  else
    call('HSET', key, string.format('%d', current), string.format('%d', current_count + taken), 'p', p)
    delete_fields(stale)
  end
  expire_after(reset)
end

return window_reply(violated, counts, taken, reset, retry, ends)
