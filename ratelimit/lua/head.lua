-- head.lua: joined after the runtime's `local cross_slot = true|false`
-- (the script is flagged allow-cross-slot-keys; batch.lua reads it), and
-- before the function `decider` (lua/README.md): what the calls of one
-- script call share.

-- The library functions every call uses, as locals of the script: a
-- global's field is two table lookups at every use. Only the fixed windows
-- (fixed_window.lua, fixed_window_counter.lua) call `try`: the other
-- scripts share this head and leave it unread.
-- luacheck: push ignore 211/try
local call, try, struct_pack, struct_unpack = redis.call, redis.pcall, struct.pack, struct.unpack
-- luacheck: pop

-- Redis's clock in µs, read once per script call: Redis itself expires keys
-- by one time for a whole script, and the calls of a batch waited together,
-- so judging them at one time is judging them as if they came in the same µs.
local time_read = false
local function redis_time()
  if not time_read then
    local t = call('TIME')
    time_read = t[1] * 1000000 + t[2]
  end
  return time_read
end
