-- token_bucket.lua: starts full, refills continuously or by interval; pass
-- iff tokens >= cost. Twin: src/algo/bucket.rs.
--
-- Policy     local capacity, n, p, step  (policy_bucket.lua)
--            (capacity in tokens; the rate in lowest terms, n units per
--            p µs: one token is p units, the bucket gains n units per µs;
--            full = capacity * p; step 1 refills continuously, step = the
--            rate's period refills by interval: only the periods, counted
--            from the epoch, that ended since a time pay, each its whole
--            n * step units at its end; a wait ends on a period's end)
-- Values     decide's (lua/README.md, "A call's values").
--            Between bucket_read.lua and bucket_state.lua, set_state.lua.
-- Returns    the bucket reply (set_state.lua), v for the units owed (missing
--            to be full; the tokens held are full - v, none when v > full):
--              allowed  v = the units owed after the call (as if taken, for
--                       a peek or cost 0; after the tokens came back, for a
--                       refund); a refund or charge replies as a check of
--                       cost 0 after it (denied while owing past full);
--              denied   v = -1 - the units owed as they stand.
--
-- State: bucket_read.lua's, owing the units missing to be full, whole even
-- above this capacity's full (a larger plan's debt): a call passes iff
-- owed + cost * p <= full. An absent key is a full bucket. Written when
-- allowed, cost > 0 and not a peek; by a refund that gives something
-- back: at most what its call may still owe, never above full; by a
-- charge of some cost, owed whatever the room (a debt past full); and by a
-- check or refund that found the state at another rate and still owing
-- (converted, taking nothing).
-- The arithmetic is leaky_bucket.lua's, its level being the debt.

local missing = owed or 0
-- Judged at t if now is earlier (clock.lua): a late call finds no more
-- than the bucket held then.
if last > now then now = last end
if now > last then
  -- The µs paid for since `last`: all, or the ended periods' (algo::counted).
  local gained = (now - now % step - (last - last % step)) * n
  if gained >= missing then missing = 0 else missing = missing - gained end
end

-- A cost above capacity never passes (checked first: it may exceed 2^53).
-- For bucket_state.lua: `write`, and `missing`, the units the bucket lacks
-- to be full again after the call.
local reply, write = -1 - missing, false
if refund then
  -- What the refunded call may still owe (algo::refunded_units): its
  -- cost * p less what the rate paid off since it was taken (permit's
  -- first double), never below zero. A product past 2^53 rounds, but
  -- stays above the debt: a full bucket.
  local back = cost * p
  local taken = struct_unpack('<d', permit)
  if now > taken then
    local paid = (now - now % step - (taken - taken % step)) * n
    -- Under another pace than the state's (rate or refill), the faster.
    if was_n ~= n or was_p ~= p or was_step ~= step then
      local at_was = math.ceil((now - now % was_step - (taken - taken % was_step)) * was_n / was_p * p)
      if at_was > paid then paid = at_was end
    end
    if paid >= back then back = 0 else back = back - paid end
  end
  local before = missing
  if back >= missing then missing = 0 else missing = missing - back end
  -- Reported as a check of cost 0: denied while a larger plan's debt
  -- is still above this full.
  if missing <= full then reply = missing else reply = -1 - missing end
  write = missing < before
elseif charge then
  -- A charge owes its cost whatever the room (a settlement above its
  -- estimate), at most 2^52 units in all (algo::charged: exact in doubles),
  -- and reports as a check of cost 0.
  local before = missing
  local more = missing + cost * p
  if more > 4503599627370496 then more = 4503599627370496 end
  if more > missing then missing = more end
  if missing <= full then reply = missing else reply = -1 - missing end
  write = missing > before
elseif cost <= capacity and missing + cost * p <= full then
  missing = missing + cost * p
  reply = missing
  write = cost > 0 and not peek
end
if converted and missing > 0 and not peek then write = true end
