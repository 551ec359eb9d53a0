-- policy_counter.lua: the counter reader. Sets `limit`, and the window in
-- ms as `window`, from `policy` (lua/README.md).
local limit, window = struct_unpack('<dd', policy)
