-- policy_bucket.lua: the buckets reader (prelude.lua, ARGV [1]) (token and leaky bucket).
local capacity, n, p = struct.unpack('<ddd', policy)
