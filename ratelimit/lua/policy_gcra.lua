-- policy_gcra.lua: the buckets reader (prelude.lua, ARGV [1]), for gcra.
local burst, n, p = struct.unpack('<ddd', policy)
