-- policy_bucket.lua: the token and leaky bucket reader. Sets `capacity`
-- and the rate in lowest terms, n units per p µs, from `policy`
-- (lua/README.md).
local capacity, n, p = struct_unpack('<ddd', policy)
