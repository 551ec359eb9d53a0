-- policy_sliding_window.lua: the sliding window's reader. Sets `precision`
-- (µs), `limits` and `windows` (µs), one entry per strategy in declared
-- order, from `policy` (lua/README.md), and what sliding_window.lua needs
-- of them once per policy rather than once per call: `spans` (each window
-- in sub-windows), `widest` (the ring's length), `signature` (the state's
-- first bytes when written under this policy) and `tail` (the struct
-- format of the newest index and the totals).
local precision = struct_unpack('<d', policy)
local limits, windows, spans, widest = {}, {}, {}, 0
for i = 1, (#policy - 8) / 16 do
  limits[i], windows[i] = struct_unpack('<dd', policy, 16 * i - 7)
  spans[i] = math.floor(windows[i] / precision)
  if spans[i] > widest then widest = spans[i] end
end
local signature = struct_pack('<dd' .. string.rep('d', #spans), precision, #spans, unpack(spans))
local tail = '<' .. string.rep('d', #spans + 1)
