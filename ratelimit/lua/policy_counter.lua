-- policy_counter.lua: the counter reader. Sets `limit`, and the window in
-- ms as `window` and as `window_text`, the text PEXPIRE is given, from
-- `policy` (lua/README.md).
local limit = struct_unpack('<d', policy)
local window_text = string.sub(policy, 9)
local window = tonumber(window_text)
