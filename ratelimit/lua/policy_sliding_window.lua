-- policy_sliding_window.lua: the sliding window's reader. Sets `precision`
-- (µs), `limits` and `windows` (µs), one entry per strategy in declared
-- order, from `policy` (lua/README.md), and, once per policy rather than
-- once per call, `spans` (each window in sub-windows) and `widest` (the
-- most sub-windows a window holds: the ring's length, sliding_window.lua).
local precision = struct_unpack('<d', policy)
local limits, windows, spans, widest = {}, {}, {}, 0
for i = 1, (#policy - 8) / 16 do
  limits[i], windows[i] = struct_unpack('<dd', policy, 16 * i - 7)
  spans[i] = math.floor(windows[i] / precision)
  if spans[i] > widest then widest = spans[i] end
end
