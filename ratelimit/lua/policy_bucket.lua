-- policy_bucket.lua: the token and leaky bucket reader. Sets `capacity`,
-- the rate in lowest terms, n units per p µs, and `step`, the µs the
-- refill steps by (1, continuous; a token bucket refilled by interval, its
-- rate's period, counted from the epoch), from `policy` (lua/README.md).
local capacity, n, p, step = struct_unpack('<dddd', policy)
