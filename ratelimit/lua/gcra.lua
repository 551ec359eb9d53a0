-- gcra.lua: the generic cell rate algorithm, answering as redis-cell's
-- CL.THROTTLE key burst count period qty does. Twin: src/algo/gcra.rs.
--
-- Policy     local burst, n, p = <burst>, <n>, <p>  (policy_gcra.lua)
--            (limit = burst + 1; the rate in lowest terms, n per p µs.
--            Times are in units of 1/n µs: the emission interval is p
--            units, the tolerance (burst + 1) * p units)
-- Values     decide's (lua/README.md, "A call's values"). Followed by set_state.lua.
-- Returns    the bucket reply (set_state.lua), where v counts in units how
--            far the TAT is ahead of now (redis-cell's ttl):
--              allowed  v = the debt after the call (as if taken, for a
--                       peek or cost 0; after the refund, for a refund), at
--                       most the tolerance;
--              denied   v = -1 - debt, the debt as it stands (a refund's,
--                       after it, still above the tolerance a policy with a
--                       smaller burst left).
--
-- State (a string): the theoretical arrival time (TAT), exactly tat_us +
-- rem / n µs with 0 <= rem < n, and the rate it was written under, as
-- struct.pack('<ddd', tat_us, n, p) (24 bytes) when rem = 0, else
-- struct.pack('<dddd', tat_us, rem, n, p) (32 bytes): binary, so it parses
-- and formats no number. Written when allowed, cost > 0 and not a peek;
-- by a refund while the TAT is ahead of now, which moves it back by cost
-- emission intervals less the time since the refunded call was taken
-- (what it may still owe), never before now; by a charge of some cost,
-- which moves it on by cost emission intervals whatever the room (past
-- the tolerance: a debt); and by a check or
-- refund that found a TAT ahead of now written under another rate
-- (converted to this one, taking nothing, so the retry it names is paid
-- off at this rate). With the
-- server clock a TTL runs to the end of the second holding
-- ceil(TAT), and a write whose ceil(TAT) falls in the second of the TAT it
-- replaces, in a state of the same length, keeps it (set_state.lua). Under
-- another rate, the debt it left is the same permits owed, counted in this
-- rate's units and rounded up
-- (never more room), so a key keeps what it used across a change of its
-- policy's numbers.
--
-- The TAT records no call's time, and none is needed: every write leaves
-- a TAT after its own time, so a late call (now before an earlier call's)
-- is judged at its own time against that TAT and finds more debt, never
-- more room; the admitted calls, sorted by the times they were judged at,
-- still conform.

local limit = burst + 1
local tolerance = limit * p

-- How far the TAT is ahead of now, in units (redis-cell's ttl); covered =
-- ceil(TAT) of a binary state, whose TTL lasts to the end of its second.
local debt = 0
local covered, converted = false, false
-- The rate the TAT was written under (this one's for an absent key).
local was_n, was_p = n, p
local v = call('GET', key)
if v then
  local us, rem = false, 0
  if #v == 24 then
    us, was_n, was_p = struct_unpack('<ddd', v)
    covered = us
  elseif #v == 32 then
    us, rem, was_n, was_p = struct_unpack('<dddd', v)
    covered = us + 1
  end
  if us and us >= now then
    debt = (us - now) * was_n + rem
    if was_p ~= p then debt = math.ceil(debt / was_p * p) end
    converted = was_n ~= n or was_p ~= p
  end
end

-- A cost above the limit never passes (checked first: it may exceed 2^53).
-- `ahead`: the units after now the TAT is written at, if it is written.
local reply, value, e, reset, kept = -1 - debt, false
local ahead = false
if refund then
  -- What the refunded call may still owe (algo::refunded_units): its
  -- cost * p less what the rate paid off since it was taken (permit's
  -- first double), never below zero. A product past 2^53 rounds, but
  -- stays above the debt: none is left.
  local back = cost * p
  local taken = struct_unpack('<d', permit)
  if now > taken then
    local paid = (now - taken) * n
    -- Under another rate than the state's, the faster of the two.
    if was_n ~= n or was_p ~= p then
      local at_was = math.ceil((now - taken) * was_n / was_p * p)
      if at_was > paid then paid = at_was end
    end
    if paid >= back then back = 0 else back = back - paid end
  end
  if debt > 0 and back > 0 then
    if back >= debt then debt = 0 else debt = debt - back end
    ahead = debt
  end
  if debt <= tolerance then reply = debt else reply = -1 - debt end
elseif charge then
  -- A charge moves the TAT on by its cost whatever the room (a settlement
  -- above its estimate), at most 2^52 units ahead (algo::charged: exact in
  -- doubles added to now), and reports as a check of cost 0.
  local more = debt + cost * p
  if more > 4503599627370496 then more = 4503599627370496 end
  if more > debt then
    debt = more
    ahead = debt
  end
  if debt <= tolerance then reply = debt else reply = -1 - debt end
elseif cost <= limit and debt + cost * p <= tolerance then
  reply = debt + cost * p
  if cost > 0 and not peek then ahead = reply end
end
if converted and not ahead and debt > 0 and not peek then ahead = debt end
if ahead then
  -- The new TAT is now + ahead / n µs; reset = ceil(ahead / n).
  if n == 1 then
    value, reset = struct_pack('<ddd', now + ahead, n, p), ahead
  else
    local whole = math.floor(ahead / n)
    local rem = ahead - whole * n
    if rem == 0 then
      value, reset = struct_pack('<ddd', now + whole, n, p), whole
    else
      value, reset = struct_pack('<dddd', now + whole, rem, n, p), whole + 1
    end
  end
  -- e = ceil(new TAT); its second, against covered's; a state of the same
  -- length is overwritten in place (set_state.lua).
  e = now + reset
  kept = covered and #v == #value and e - e % 1000000 == covered - covered % 1000000
end
