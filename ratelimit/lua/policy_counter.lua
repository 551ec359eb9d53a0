-- policy_counter.lua: the counter reader (prelude.lua, ARGV [1]).
local limit = struct.unpack('<d', policy)
local window_text = string.sub(policy, 9)
local window = tonumber(window_text)
