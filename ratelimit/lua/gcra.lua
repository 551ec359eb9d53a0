-- gcra.lua: the generic cell rate algorithm, answering as redis-cell's
-- CL.THROTTLE key burst count period qty does. Twin: src/algo/gcra.rs.
--
-- One script per policy: loaded after the runtime's line of constants
--   local burst, n, p = <burst>, <n>, <p>
-- (limit = burst + 1; the rate in lowest terms, n per p µs. Times are in
-- units of 1/n µs: the emission interval is p units, the tolerance
-- (burst + 1) * p units), policy_prelude.lua, which reads KEYS[1] and the
-- optional ARGV (cost, peek, now, slack) into `key`, `cost`, `peek`, `now`
-- and `server_clock`, and set_state.lua, whose set_state writes the state
-- with its TTL.
-- Returns  {allowed (1|0), limit = burst + 1, remaining, reset_after_us,
--           retry_after_us (-1 = none), violated = 0,
--           now (µs: the time the decision was made at)}.
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
-- callgrind): no closures or tables but the reply, numeric ARGV read with
-- `+ 0`, no division when n = 1 (every rate whose count divides its period,
-- e.g. 1000/1s), the slack added only when there is one.
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

local never = cost > limit
local increment = never and 0 or cost * p
local allowed = not never and debt + increment <= tolerance
local ttl = allowed and debt + increment or debt
-- retry = ceil(a / n), reset = ceil(ttl / n), on integers held in doubles:
-- floor, then step up if short.
local retry, reset = -1, ttl
if n ~= 1 then
  reset = math.floor(ttl / n)
  if reset * n < ttl then reset = reset + 1 end
end
if not allowed and not never then
  local a = debt + increment - tolerance
  retry = a
  if n ~= 1 then
    retry = math.floor(a / n)
    if retry * n < a then retry = retry + 1 end
  end
end
local remaining = tolerance - ttl
if remaining < 0 then remaining = 0 end

if allowed and cost > 0 and not peek then
  local value
  if n == 1 then
    value = struct.pack('<d', now + ttl)
  else
    local whole = math.floor(ttl / n)
    local rem = ttl - whole * n
    if rem == 0 then
      value = struct.pack('<d', now + whole)
    else
      value = struct.pack('<ddb', now + whole, rem, 0)
    end
  end
  -- e = ceil(new TAT); its second, e - e % 1000000, against covered's.
  local e = now + reset
  set_state(value, e, covered and e - e % 1000000 == covered - covered % 1000000, reset)
end

return {allowed and 1 or 0, limit, math.floor(remaining / p), reset, retry, 0, now}
