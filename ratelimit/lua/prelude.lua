-- prelude.lua: the contract every script shares. One script per family
-- of algorithm (ratelimit/src/backend/redis/scripts.rs), whatever the
-- policy: the policy's numbers travel with each call (prelude.lua).
--
-- The runtime joins this prelude, a policy reader and the algorithm into
-- one function, `decide(key, o)`, which decides one call on `key` from the
-- five values after ARGV offset `o`, and joins batch.lua after it, which
-- calls it once per call.
--
-- KEYS[1]  the key of the (first) call: the one key Redis routes by.
-- ARGV     one call: its five values at ARGV[1..5], the policy always, the
--          others optional, in this order (a later one needs the earlier
--          ones; the runtime leaves out the trailing ones that are the
--          common call's). A batch of m calls (batch.lua) sends all five
--          of each call's, an empty now for Redis's clock.
--   [1] the policy's numbers, binary little-endian doubles, each an integer
--       held exactly, so reading them parses no text; a reader joined
--       after this prelude, chosen by the family, sets them:
--         policy_windows.lua  precision (µs; 0 but for a sliding window),
--                             then each strategy's limit and window (µs);
--         policy_bucket.lua   capacity, n, p (the rate in lowest terms:
--                             n units per p µs); policy_gcra.lua the same
--                             with the burst;
--         policy_counter.lua  the limit, then the window in ms as decimal
--                             text (what PEXPIRE is given);
--   [2] cost, integer >= 0; absent = 1 (may exceed 2^53: then it is above
--       every limit, and no script multiplies it before checking that);
--   [3] "1" = peek (decide, write nothing); "2" = refund (give cost
--       permits back, never past an untouched state, and reply as a check
--       of cost 0 would; sent only to the scripts that keep refunds:
--       fixed_window, fixed_window_counter, token_bucket, leaky_bucket,
--       gcra); absent or "0" = a check;
--   [4] now, integer µs since the epoch; absent or empty = Redis's own
--       clock (TIME, read by clock.lua);
--   [5] TTL slack in ms added to every expiry (sent with [4]); absent = 0.
-- Every ARGV comes from the runtime, so none is ever malformed.
--
-- Sets `policy`, `cost`, `peek`, `refund`, `now` (nil until clock.lua
-- reads TIME), `server_clock` and `slack`; `key` is the function's parameter.
local policy = ARGV[o + 1]
local cost = 1
if ARGV[o + 2] then cost = ARGV[o + 2] + 0 end
local peek = ARGV[o + 3] == '1'
local refund = ARGV[o + 3] == '2'
local now = tonumber(ARGV[o + 4])
local server_clock = not now
local slack = 0
if ARGV[o + 5] then slack = ARGV[o + 5] + 0 end
