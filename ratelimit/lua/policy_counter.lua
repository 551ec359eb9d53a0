-- policy_counter.lua: the counter reader (prelude.lua's `policy`).
local limit = struct_unpack('<d', policy)
local window_text = string.sub(policy, 9)
local window = tonumber(window_text)
