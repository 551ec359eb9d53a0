-- policy_windows.lua: the windows reader. Sets `precision` (µs; 0 but for
-- a sliding window), then `limits` and `windows` (µs), one entry per
-- strategy in declared order, from `policy` (lua/README.md). A fixed
-- window with calendar strategies sends -1 for the precision, then a third
-- number per strategy: `opens`, where the calendar window holding the call
-- begins (µs; its `windows` entry is that window's length), -1 for a
-- window started by a key's first hit (left nil).
local precision = struct_unpack('<d', policy)
local limits, windows, opens = {}, {}, {}
if precision < 0 then
  for i = 1, (#policy - 8) / 24 do
    local open
    limits[i], windows[i], open = struct_unpack('<ddd', policy, 24 * i - 15)
    if open >= 0 then opens[i] = open end
  end
else
  for i = 1, (#policy - 8) / 16 do
    limits[i], windows[i] = struct_unpack('<dd', policy, 16 * i - 7)
  end
end
