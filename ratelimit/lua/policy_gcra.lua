-- policy_gcra.lua: the buckets reader (prelude.lua's `policy`), for gcra.
local burst, n, p = struct_unpack('<ddd', policy)
