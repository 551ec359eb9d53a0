-- bucket_state.lua: joined after token_bucket.lua or leaky_bucket.lua and
-- before set_state.lua, so both buckets make their new state (bucket_read.lua's
-- format) the same way.
--
-- The bucket leaves:
--   reply    the units held (token) or the level (leaky) after the call;
--   write    the call is admitted, costs something and is not a peek; or
--            it is a refund that gave something back; or a check or refund
--            found the state at another rate, still owing (converted);
--   missing  the units until the bucket is untouched again (full, or
--            empty): what it owes, the state's m;
--   last     when its units were last counted (µs), at most now (the
--            time judged at, which this write records); covered as it says.
-- Sets, for set_state.lua: value (the state, 33 bytes, or 41 with an
-- interval refill's step; or false), e (when the
-- bucket is untouched again, µs), reset (e - last, rounded up) and kept.
--
-- With the server clock a TTL runs to the end of e's whole second, and the
-- state records that second as d = whole seconds from t's second (255 = not
-- recorded), so the next write in the same second can keep the TTL.
local value, e, reset, kept = false
if write then
  last = now
  -- reset = ceil(missing / n): no division when n = 1 (every rate whose
  -- count divides its period), else floor, then step up if short, on
  -- integers held in doubles.
  reset = missing
  if n ~= 1 then
    reset = math.floor(missing / n)
    if reset * n < missing then reset = reset + 1 end
  end
  -- By interval, paid at the end of the period that pays the last unit
  -- (algo::paid_after).
  if step ~= 1 and reset > 0 then
    local periods = math.floor(reset / step)
    if periods * step < reset then periods = periods + 1 end
    reset = periods * step - last % step
  end
  e = last + reset
  local second = e - e % 1000000
  local d = (second - (last - last % 1000000)) / 1000000
  if not server_clock or d > 254 then d = 255 end
  if step == 1 then
    value = struct_pack('<ddBdd', missing, last, d, p, n)
  else
    value = struct_pack('<ddBddd', missing, last, d, p, n, step)
  end
  kept = covered == second
end
