-- policy_bucket.lua: the buckets reader (prelude.lua's `policy`) (token and leaky bucket).
local capacity, n, p = struct_unpack('<ddd', policy)
