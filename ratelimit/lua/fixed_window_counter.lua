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
-- more; the constants took a call from 27 000 to 22 600 instructions, and
-- the common call's own short path (below) to 22 200 (issue 6; 19 500 for
-- the bare INCR + PEXPIRE, measured alike).
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
-- The common call (cost 1, a check) reads no ARGV and runs INCR, then PTTL
-- (or PEXPIRE when it started the window): laid out so that it meets as few
-- tests and table lookups as possible (that saved 1 000 instructions).
local key, call = KEYS[1], redis.call
local cost, count = 1, nil
if ARGV[1] then
  cost = ARGV[1] + 0
  if ARGV[2] == '1' or cost == 0 or cost > limit then
    count = tonumber(call('GET', key) or 0)
    local t = 0
    if count > 0 then
      t = call('PTTL', key) + 1
      -- No TTL (-1, never written so by this script): as a window starting now.
      if t < 1 then t = window + 1 end
    end
    if count + cost > limit then return -1 - (math.min(count, limit) * (window + 2) + t) end
    if cost > 0 and t == 0 then t = window + 1 end
    return (count + cost) * (window + 2) + t
  end
  count = call('INCRBY', key, cost)
else
  count = call('INCR', key)
end
local t
if count == cost then
  -- The key was absent (every key holds at least one permit): a window starts.
  call('PEXPIRE', key, window_text)
  t = window + 1
else
  t = call('PTTL', key) + 1
  if t < 1 then
    call('PEXPIRE', key, window_text)
    t = window + 1
  end
end
if count > limit then
  call('DECRBY', key, cost)
  return -1 - (math.min(count - cost, limit) * (window + 2) + t)
end
return count * (window + 2) + t
