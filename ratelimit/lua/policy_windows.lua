-- policy_windows.lua: the windows reader (prelude.lua's `policy`).
local precision = struct_unpack('<d', policy)
local limits, windows = {}, {}
for i = 1, (#policy - 8) / 16 do
  limits[i], windows[i] = struct_unpack('<dd', policy, 16 * i - 7)
end
