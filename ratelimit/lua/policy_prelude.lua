-- policy_prelude.lua: joined in front of the scripts that are made once per
-- policy (token_bucket, leaky_bucket, gcra; ratelimit/src/scripts.rs), after
-- the line of constants the runtime writes for the policy, e.g.
--   local capacity, n, p = 10, 1, 300000
-- so a call sends only what differs from the common case: each ARGV costs
-- Redis about 1 500 instructions and reading a number from one 800 more;
-- gcra went from 60 700 to 50 100 instructions per call this way (issue 6).
--
-- KEYS[1]  the only key a decision touches.
-- ARGV     all optional, in this order (a later one needs the earlier ones):
--   [1] cost, integer >= 0; absent = 1 (may exceed 2^53: then it is above
--       every limit, and no script multiplies it before checking that);
--   [2] "1" = peek (decide, write nothing); absent or "0" = check;
--   [3] now, integer µs since the epoch; absent = the server clock (TIME);
--   [4] TTL slack in ms added to every expiry (sent with [3]).
-- Sets `key`, `cost`, `peek`, `now` and `server_clock` for the script.
local key = KEYS[1]
local cost = 1
if ARGV[1] then cost = ARGV[1] + 0 end
local peek = ARGV[2] == '1'
local now = ARGV[3]
local server_clock = not now
if server_clock then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = now + 0
end
