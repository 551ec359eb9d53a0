-- policy_concurrency.lua: the concurrency reader (prelude.lua, ARGV [1]).
local limit, lease = struct_unpack('<dd', policy)
