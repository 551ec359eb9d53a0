-- prelude.lua: the contract every script shares. A script is made per
-- policy (ratelimit/src/backend/redis/scripts.rs): one line of the policy's
-- constants, this prelude, then the algorithm; so no ARGV carries the policy,
-- and every script takes the same ARGV.
--
-- KEYS[1]  the one key a decision reads and writes.
-- ARGV     the call, every one optional, in this order (a later one needs
--          the earlier ones; the runtime leaves out the trailing ones that
--          are the common call's):
--   [1] cost, integer >= 0; absent = 1 (may exceed 2^53: then it is above
--       every limit, and no script multiplies it before checking that);
--   [2] "1" = peek (decide, write nothing); absent or "0" = a check;
--   [3] now, integer µs since the epoch; absent = Redis's own clock (TIME,
--       read by clock.lua);
--   [4] TTL slack in ms added to every expiry (sent with [3]); absent = 0.
-- Every ARGV comes from the runtime, so none is ever non-numeric.
--
-- A batch of calls of one limiter would keep this order: KEYS[1..m] and the
-- four ARGV of call j at ARGV[4j-3..4j], every one sent, and a reply per call.
--
-- Sets `key`, `cost`, `peek`, `now` (false until clock.lua reads TIME),
-- `server_clock` and `slack`.
local key = KEYS[1]
local cost = 1
if ARGV[1] then cost = ARGV[1] + 0 end
local peek = ARGV[2] == '1'
local now = ARGV[3]
local server_clock = not now
if not server_clock then now = now + 0 end
local slack = 0
if ARGV[4] then slack = ARGV[4] + 0 end
