-- policy_windows.lua: the windows reader. Sets `precision` (µs; 0 but for
-- a sliding window), then `limits` and `windows` (µs), one entry per
-- strategy in declared order, from `policy` (lua/README.md).
local precision = struct_unpack('<d', policy)
local limits, windows = {}, {}
for i = 1, (#policy - 8) / 16 do
  limits[i], windows[i] = struct_unpack('<dd', policy, 16 * i - 7)
end
