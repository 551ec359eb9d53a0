-- prelude.lua: joined in front of every algorithm script when it is loaded
-- (ratelimit/src/scripts.rs), so each script starts with:
--   key   KEYS[1], the only key a decision touches;
--   now   ARGV[1], integer µs since the epoch, or the server clock (TIME)
--         when ARGV[1] is the empty string;
--   cost  ARGV[2], the permits asked for (may exceed 2^53: then it is above
--         every limit, and no script multiplies it before checking that).
-- Numeric ARGV are read with `+ 0` rather than tonumber(): the same
-- conversion without a function call, measurably cheaper (issue 6). Every
-- ARGV comes from the runtime, so none is ever non-numeric.
local key = KEYS[1]
local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = now + 0
end
local cost = ARGV[2] + 0
