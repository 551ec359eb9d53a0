-- token_bucket.lua: starts full, refills continuously; pass iff tokens >= cost.
-- Twin: src/algo/token_bucket.rs.
--
-- Policy     local capacity, n, p = <capacity>, <n>, <p>  (prelude.lua)
--            (capacity in tokens; the rate in lowest terms, n units per
--            p µs: one token is p units, the bucket gains n units per µs;
--            full = capacity * p)
-- KEYS, ARGV prelude.lua's. Followed by bucket_state.lua and set_state.lua.
-- Returns    the bucket reply (set_state.lua), v for the units held:
--              allowed  v = the units after the call (as if taken, for a
--                       peek or cost 0);
--              denied   v = -1 - the units as they stand.
--
-- State (a 17-byte string): struct.pack('<ddB', u, t, d): u = units held,
-- t = when they were last counted (µs), both integers below 2^53 held
-- exactly in doubles, and d for the TTL (bucket_state.lua). Binary, so
-- reading and writing it parses and formats no number; one GET and one SET.
-- An absent key is a full bucket (u = full, t = now). Written only when
-- allowed, cost > 0 and not a peek.

local full = capacity * p
local units, last
local v = redis.call('GET', key)
-- covered: the start (µs) of the second to whose end the TTL runs, if known.
local covered = false
if v and #v == 17 then
  local d
  units, last, d = struct.unpack('<ddB', v)
  if d < 255 then covered = last - last % 1000000 + d * 1000000 end
  if units > full then units = full end
else
  units, last = full, now
end
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
if cost <= capacity and units >= cost * p then
  reply = units - cost * p
  write = cost > 0 and not peek
  missing = full - reply
end
