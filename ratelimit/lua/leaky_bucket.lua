-- leaky_bucket.lua: starts empty, drains continuously; a call adds its cost
-- to the level and passes iff the level stays within capacity.
-- Twin: src/algo/leaky_bucket.rs.
--
-- Policy     local capacity, n, p, step  (policy_bucket.lua; step is 1:
--            a leaky bucket always drains continuously)
--            (capacity in requests; the rate in lowest terms, n units per
--            p µs: one request is p units, the bucket drains n units per
--            µs; full = capacity * p)
-- Values     decide's (lua/README.md, "A call's values").
--            Between bucket_read.lua and bucket_state.lua, set_state.lua.
-- Returns    the bucket reply (set_state.lua), v for the level in units:
--              allowed  v = the level after the call (as if taken, for a
--                       peek or cost 0; after it was lowered, for a refund);
--              denied   v = -1 - the level as it stands (above full when a
--                       larger plan raised it).
--
-- State: bucket_read.lua's, owing the level, whole even above this
-- capacity's full. An absent key is an empty bucket. Written when allowed,
-- cost > 0 and not a peek; by a refund that lowers the level: by at most
-- what its call may still hold, never below empty; by a charge of some
-- cost, which raises it whatever the room (above full: a debt); and by a check or
-- refund that found the level at another rate and not empty (converted,
-- taking nothing).

local level = owed or 0
-- Judged at t if now is earlier (clock.lua): a late call finds the
-- bucket no emptier than it was then.
if last > now then now = last end
if now > last then
  local drained = (now - last) * n
  if drained >= level then level = 0 else level = level - drained end
end

-- A cost above capacity never passes (checked first: it may exceed 2^53).
-- For bucket_state.lua: `write`, and `missing`, the level left to drain
-- until the bucket is empty again after the call.
local reply, write, missing = -1 - level, false
if refund then
  -- What the refunded call may still owe (algo::refunded_units): its
  -- cost * p less what the rate paid off since it was taken (permit's
  -- first double), never below zero. A product past 2^53 rounds, but
  -- stays above the level: empty.
  local back = cost * p
  local taken = struct_unpack('<d', permit)
  if now > taken then
    local paid = (now - taken) * n
    -- Under another pace than the state's, the faster of the two (a
    -- leaky bucket drains continuously: its step is always 1).
    if was_n ~= n or was_p ~= p or was_step ~= step then
      local at_was = math.ceil((now - taken) * was_n / was_p * p)
      if at_was > paid then paid = at_was end
    end
    if paid >= back then back = 0 else back = back - paid end
  end
  local before = level
  if back >= level then level = 0 else level = level - back end
  -- Reported as a check of cost 0: denied while a larger plan's debt
  -- is still above this full.
  if level <= full then reply = level else reply = -1 - level end
  write = level < before
elseif charge then
  -- A charge raises the level by its cost whatever the room (a
  -- settlement above its estimate), at most 2^52 units (algo::charged:
  -- exact in doubles), and reports as a check of cost 0.
  local before = level
  local more = level + cost * p
  if more > 4503599627370496 then more = 4503599627370496 end
  if more > level then level = more end
  if level <= full then reply = level else reply = -1 - level end
  write = level > before
elseif cost <= capacity and level + cost * p <= full then
  level = level + cost * p
  reply = level
  write = cost > 0 and not peek
end
missing = level
if converted and level > 0 and not peek then write = true end
