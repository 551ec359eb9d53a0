-- policy_sliding_window.lua: the sliding window's reader. Sets `precision`
-- (µs), `limits` and `windows` (µs), one entry per strategy in declared
-- order, from `policy` (lua/README.md), and, once per policy rather than
-- once per call, `spans` (each window in sub-windows), `widest` (the
-- most sub-windows a window holds: the ring's length), where the state's
-- totals and ring begin, whether a call reads and writes the ring whole,
-- and `ring`, which reads sub-windows' counts (sliding_window.lua).
local precision = struct_unpack('<d', policy)
local limits, windows, spans, widest = {}, {}, {}, 0
for i = 1, (#policy - 8) / 16 do
  limits[i], windows[i] = struct_unpack('<dd', policy, 16 * i - 7)
  spans[i] = math.floor(windows[i] / precision)
  if spans[i] > widest then widest = spans[i] end
end
-- The totals' and the ring's first byte, less one.
local totals_at = 24 + #policy
local ring_at = totals_at + 8 * #limits
-- Whether a call reads and writes the ring whole: a few sub-windows cost
-- less in one GET than in the commands that would read them apart.
local whole = widest <= 64

-- Where the counts of sub-windows from to to (to - from < widest) of `key`,
-- whose `state` was read, lie, as doubles in that order: the string holding
-- them and the first's byte. In a state read whole, in place unless the
-- ring wraps between them; else read by GETRANGE, once or twice as the
-- ring wraps. Made once per policy, not per call.
local function ring(state, key, from, to)
  local a, b = from % widest, to % widest
  if whole and a <= b then return state, ring_at + 8 * a + 1 end
  local x, y = ring_at + 8 * a, ring_at + 8 * b + 7
  if a <= b then return call('GETRANGE', key, string.format('%d', x), string.format('%d', y)), 1 end
  local last_byte = ring_at + 8 * widest
  if whole then return string.sub(state, x + 1, last_byte) .. string.sub(state, ring_at + 1, y + 1), 1 end
  return call('GETRANGE', key, string.format('%d', x), string.format('%d', last_byte - 1))
    .. call('GETRANGE', key, string.format('%d', ring_at), string.format('%d', y)), 1
end
