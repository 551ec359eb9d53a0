-- token_bucket.lua: starts full, refills continuously; pass iff tokens >= cost.
-- Twin: src/algo/token_bucket.rs.
--
-- Policy     local capacity, n, p = <capacity>, <n>, <p>  (prelude.lua)
--            (capacity in tokens; the rate in lowest terms, n units per
--            p µs: one token is p units, the bucket gains n units per µs;
--            full = capacity * p)
-- Values     prelude.lua's (KEYS and ARGV: batch.lua). Between bucket_read.lua and bucket_state.lua, set_state.lua.
-- Returns    the bucket reply (set_state.lua), v for the units held:
--              allowed  v = the units after the call (as if taken, for a
--                       peek or cost 0; after the tokens came back, for a
--                       refund);
--              denied   v = -1 - the units as they stand.
--
-- State: bucket_read.lua's, owing the units missing to be full. An absent
-- key is a full bucket. Written only when allowed, cost > 0 and not a peek;
-- and by a refund of cost > 0 to a bucket the key holds, which puts the
-- tokens back, never above full.

-- The units held.
local units = full
if owed then units = full - owed end
-- Judged at t if now is earlier (clock.lua): a late call finds no more
-- than the bucket held then.
if last > now then now = last end
if now > last then
  local gained = (now - last) * n
  if gained >= full - units then units = full else units = units + gained end
end

-- A cost above capacity never passes (checked first: it may exceed 2^53).
-- For bucket_state.lua: `write`, and `missing`, the units the bucket lacks
-- to be full again after the call.
local reply, write, missing = -1 - units, false
if refund then
  -- A product past 2^53 rounds, but stays above full - units: a full bucket.
  local back = cost * p
  if back >= full - units then units = full else units = units + back end
  reply = units
  write = owed and cost > 0
  missing = full - units
elseif cost <= capacity and units >= cost * p then
  reply = units - cost * p
  write = cost > 0 and not peek
  missing = full - reply
end
