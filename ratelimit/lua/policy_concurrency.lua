-- policy_concurrency.lua: the concurrency reader. Sets `limit` and `lease`
-- (µs) from `policy` (lua/README.md).
local limit, lease = struct_unpack('<dd', policy)
