-- policy_concurrency.lua: the concurrency reader (prelude.lua's `policy`).
local limit, lease = struct_unpack('<dd', policy)
