-- prelude.lua: the contract every script shares. A script is made per
-- policy (ratelimit/src/backend/redis/scripts.rs): one line of the policy's
-- constants, this prelude, then the algorithm; so no ARGV carries the policy,
-- and every script takes the same ARGV.
--
-- The runtime joins this prelude and the algorithm into one function,
-- `decide(key, o)`, which decides one call on `key` from the four values
-- after ARGV offset `o`, and joins batch.lua after it, which calls it once per key.
--
-- KEYS[1]  the key of the (first) call: the one key Redis routes by.
-- ARGV     one call: its four values at ARGV[1..4], every one optional, in
--          this order (a later one needs the earlier ones; the runtime
--          leaves out the trailing ones that are the common call's). A batch
--          of m calls (batch.lua): call j's key at ARGV[5j-4] and its four
--          values at ARGV[5j-3..5j], every one sent, an empty now for
--          Redis's clock.
--   [1] cost, integer >= 0; absent = 1 (may exceed 2^53: then it is above
--       every limit, and no script multiplies it before checking that);
--   [2] "1" = peek (decide, write nothing); absent or "0" = a check;
--   [3] now, integer µs since the epoch; absent or empty = Redis's own
--       clock (TIME, read by clock.lua);
--   [4] TTL slack in ms added to every expiry (sent with [3]); absent = 0.
-- Every ARGV comes from the runtime, so none is ever non-numeric.
--
-- Sets `cost`, `peek`, `now` (nil until clock.lua reads TIME),
-- `server_clock` and `slack`; `key` is the function's parameter.
local cost = 1
if ARGV[o + 1] then cost = ARGV[o + 1] + 0 end
local peek = ARGV[o + 2] == '1'
local now = tonumber(ARGV[o + 3])
local server_clock = not now
local slack = 0
if ARGV[o + 4] then slack = ARGV[o + 4] + 0 end
