-- gcra.lua: the generic cell rate algorithm, answering as redis-cell's
-- CL.THROTTLE key burst count period qty does. Twin: src/algo/gcra.rs.
--
-- One script per policy: loaded after the runtime's line of constants
--   local burst, n, p = <burst>, <n>, <p>
-- (limit = burst + 1; the rate in lowest terms, n per p µs. Times are in
-- units of 1/n µs: the emission interval is p units, the tolerance
-- (burst + 1) * p units), policy_prelude.lua, which reads KEYS[1] and the
-- optional ARGV (cost, peek, now, slack) into `key`, `cost`, `peek`, `now`
-- and `server_clock`; then set_state.lua, which writes the state with its
-- TTL and replies.
-- Returns  struct.pack('<dd', v, now) (set_state.lua), where v counts in
--          units how far the TAT is ahead of now (redis-cell's ttl):
--            allowed  v = the debt after the call (as if taken, for a peek
--                     or cost 0), at most the tolerance;
--            denied   v = -1 - debt, the debt as it stands;
--          the runtime rebuilds remaining, reset_after and retry_after
--          exactly from v, the cost and the constants
--          (src/backend/policy_reply.rs, the twin's formulas).
--
-- State on Redis: the theoretical arrival time (TAT), exactly tat_us +
-- rem / n µs with 0 <= rem < n, as struct.pack('<d', tat_us) (8 bytes) when
-- rem = 0, else struct.pack('<ddb', tat_us, rem, 0) (17 bytes): binary, so
-- it costs no number parsing or formatting. The text an earlier version
-- wrote ("<tat_us>" or "<tat_us>:<rem>", 16 bytes or more) is still read.
-- Written only when allowed, cost > 0 and not a peek.
--
-- TTL: the key must outlive ceil(TAT) (+ slack with a client clock). With
-- a client clock every write sets PX = ceil(reset_after_us / 1000) + slack
-- ms. With the server clock (no now in ARGV), a write that sets a TTL sets it
-- to the end of the whole second holding ceil(TAT), and a write whose
-- ceil(TAT) falls in the same second as the binary TAT it replaces keeps the
-- TTL (SET ... KEEPTTL): Redis expires keys by the clock TIME reads, so that
-- TTL still covers the new TAT. Setting a TTL is about a tenth of the
-- script's cost (issue 6); a key lives at most 1 s past its reset.

-- Lean by measurement (issue 6, instructions per call counted under
-- callgrind): no closures or tables, one number back instead of the
-- decision's fields, numeric ARGV read with `+ 0`, no division when n = 1
-- (every rate whose count divides its period, e.g. 1000/1s), the slack
-- added only when there is one.
local limit = burst + 1
local tolerance = limit * p

-- How far the TAT is ahead of now, in units (redis-cell's ttl); covered =
-- ceil(TAT) of a binary state, whose TTL lasts to the end of its second.
local debt = 0
local covered = false
local v = redis.call('GET', key)
if v then
  local us, rem
  if #v == 8 then
    us, rem = struct.unpack('<d', v), 0
    covered = us
  elseif #v == 17 then
    us, rem = struct.unpack('<dd', v)
    covered = us + 1
  else
    us, rem = tonumber(v), 0
    if not us then
      local colon = string.find(v, ':', 1, true)
      if colon then
        us, rem = tonumber(string.sub(v, 1, colon - 1)), tonumber(string.sub(v, colon + 1))
      end
    end
  end
  if us and rem and us >= now then debt = (us - now) * n + rem end
end

-- A cost above the limit never passes (checked first: it may exceed 2^53).
local reply, value, e, reset, kept = -1 - debt, false
if cost <= limit and debt + cost * p <= tolerance then
  reply = debt + cost * p
  if cost > 0 and not peek then
    -- The new TAT is now + reply / n µs; reset = ceil(reply / n).
    if n == 1 then
      value, reset = struct.pack('<d', now + reply), reply
    else
      local whole = math.floor(reply / n)
      local rem = reply - whole * n
      if rem == 0 then
        value, reset = struct.pack('<d', now + whole), whole
      else
        value, reset = struct.pack('<ddb', now + whole, rem, 0), whole + 1
      end
    end
    -- e = ceil(new TAT); its second, against covered's.
    e = now + reset
    kept = covered and e - e % 1000000 == covered - covered % 1000000
  end
end
