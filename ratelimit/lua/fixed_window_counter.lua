-- fixed_window_counter.lua: a fixed window of one strategy kept as the
-- sources keep it: a counter whose TTL is the window, started by the first
-- admitted hit (INCR or INCRBY, and PEXPIRE when it created the key), so no call
-- reads a clock: Redis times the window by its own. Used on the server's
-- clock for a policy of one strategy whose reply fits a double (the rule is
-- in src/backend/fixed_window_counter.rs); lua/fixed_window.lua decides
-- every other fixed window. Not joined to prelude.lua: it needs no `now`.
--
-- One script per policy: the runtime puts a line in front of this file,
--   local limit, window, window_text = <L>, <W>, '<W>'
-- (the limit L, and the window W in whole ms as a number and as the text
-- PEXPIRE is given), so the common call sends no ARGV at all: each ARGV
-- costs Redis about 1 500 instructions, and reading a number from one 800
-- more; the constants took a call from 27 000 to 22 600 (issue 6).
--
-- KEYS[1]  the counter (a string holding an integer).
-- ARGV     the first two of policy_prelude.lua's, both optional (the
--          runtime sends the same ARGV to every script made per policy;
--          this one is only used on the server's clock, so never a time):
--   [1] cost, integer >= 0; absent = 1;
--   [2] "1" = peek: decide, write nothing.
-- Returns  one integer v = count * (W + 2) + t, where
--            count  permits taken in the window after the call (as if taken
--                   for a peek; for a denial, as it stands, at most L, so
--                   a count left by an earlier, larger limit still fits);
--            t      0 when no window runs, else PTTL + 1: the ms, rounded
--                   up, until the window has surely ended (Redis drops a
--                   key once its ms clock passes the expiry, so the window
--                   lasts W to W + 1 ms from the first hit, never less);
--          and a denial returns -1 - v. The caller knows L and W, so this
--          one integer is the whole decision.
--
-- A denied call takes nothing: its increment is undone with DECRBY in the same
-- script. Peeks, cost 0 and a cost above L (never admitted) only read.
local key = KEYS[1]
local cost = 1
if ARGV[1] then cost = ARGV[1] + 0 end
local radix = window + 2

if ARGV[2] == '1' or cost == 0 or cost > limit then
  local count = tonumber(redis.call('GET', key) or 0)
  local t = 0
  if count > 0 then
    t = redis.call('PTTL', key) + 1
    -- No TTL (-1, never written so by this script): as a window starting now.
    if t < 1 then t = window + 1 end
  end
  if count + cost > limit then return -1 - (math.min(count, limit) * radix + t) end
  if cost > 0 and t == 0 then t = window + 1 end
  return (count + cost) * radix + t
end

local count
if ARGV[1] then count = redis.call('INCRBY', key, ARGV[1]) else count = redis.call('INCR', key) end
local t
if count == cost then
  -- The key was absent (every key holds at least one permit): a window starts.
  redis.call('PEXPIRE', key, window_text)
  t = window + 1
else
  t = redis.call('PTTL', key) + 1
  if t < 1 then
    redis.call('PEXPIRE', key, window_text)
    t = window + 1
  end
end
if count > limit then
  redis.call('DECRBY', key, ARGV[1] or '1')
  return -1 - (math.min(count - cost, limit) * radix + t)
end
return count * radix + t
