-- policy_gcra.lua: the gcra reader. Sets `burst` and the rate in lowest
-- terms, n units per p µs, from `policy` (lua/README.md).
local burst, n, p = struct_unpack('<ddd', policy)
