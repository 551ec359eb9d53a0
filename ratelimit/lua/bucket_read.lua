-- bucket_read.lua: joined after clock.lua in the token and leaky bucket
-- scripts: the state both keep alike, read.
--
-- State (a 33-byte string): struct.pack('<ddBdd', m, t, d, q, r): m =
-- the units the bucket owes (a token bucket's units missing to be full, a
-- leaky bucket's level), t = when they were last counted (µs), both
-- integers below 2^53 held exactly in doubles, d for the TTL
-- (bucket_state.lua), and the rate they are counted at, r units per q µs,
-- refilled continuously; or 41 bytes, '<ddBddd', the same and s, the µs
-- an interval refill steps by. Binary, so reading and writing it parses
-- and formats no number; one GET and one SET.
--
-- What is kept is what is owed, so a key keeps it across a change of its
-- policy's numbers: a new capacity owes as much, all of it, even above
-- its own full (never clipped: a smaller plan is judged against the whole
-- debt); under a new rate, the debt is first paid off at the old rate up
-- to this call (the old policy holds until a call sees the new one, as
-- gcra's TAT does), then counted as the same permits in the new rate's
-- units, rounded up (never more room).
--
-- Sets `full` (capacity * p), `owed` (false for an absent key: an
-- untouched bucket), `last` (now for an absent key), `was_n`, `was_p`,
-- `was_step` (the pace the state was written at; this one's for an absent
-- key; a refund's bound), `converted` (the state was counted at another
-- rate: a check or refund writes it at this one, so the retry it names is
-- paid off at this rate) and `covered` (the
-- start, µs, of the second to whose end the TTL runs, if known).
local full = capacity * p
local owed, last, converted, covered = false, now, false, false
local was_n, was_p, was_step = n, p, step
local v = call('GET', key)
if v and (#v == 33 or #v == 41) then
  local d
  if #v == 33 then
    owed, last, d, was_p, was_n = struct_unpack('<ddBdd', v)
    was_step = 1
  else
    owed, last, d, was_p, was_n, was_step = struct_unpack('<ddBddd', v)
  end
  if d < 255 then covered = last - last % 1000000 + d * 1000000 end
  if was_p ~= p or was_n ~= n then
    converted = true
    if now > last then
      -- Only the ended periods of an interval refill pay (algo::owed_at).
      local paid = (now - now % was_step - (last - last % was_step)) * was_n
      if paid >= owed then owed = 0 else owed = owed - paid end
      last = now
    end
    -- The same period counts the same units (algo::owed_under): dividing
    -- and multiplying back could round up a unit.
    if was_p ~= p then owed = math.ceil(owed / was_p * p) end
  end
end
