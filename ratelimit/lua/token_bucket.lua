-- token_bucket.lua: starts full, refills continuously; pass iff tokens >= cost.
-- Twin: src/algo/token_bucket.rs.
--
-- One script per policy: loaded after the runtime's line of constants
--   local capacity, n, p = <capacity>, <n>, <p>
-- (capacity in tokens; the rate in lowest terms, n units per p µs: one
-- token is p units, so the bucket gains n units per µs; full = capacity * p),
-- policy_prelude.lua, which reads KEYS[1] and the optional ARGV (cost, peek,
-- now, slack) into `key`, `cost`, `peek`, `now` and `server_clock`, and
-- set_state.lua, whose set_state writes the state with its TTL.
-- Returns  {allowed (1|0), limit = capacity, remaining (whole tokens),
--           reset_after_us, retry_after_us (-1 = none), violated = 0,
--           now (µs: the time the decision was made at)}.
--
-- State on Redis: a 17-byte string, struct.pack('<ddB', u, t, d): u = units
-- held, t = when they were last counted (µs), both integers below 2^53 held
-- exactly in doubles, and d (below) for the TTL. Binary, so reading and
-- writing it costs no number parsing or formatting (issue 6). One GET and
-- one SET, the fewest commands. An absent key is a full bucket (u = full,
-- t = now). Earlier versions' state is still read, and replaced by the next
-- write: the text "<u>:<t>" (18 bytes or more) and a hash ("u", "t"
-- fields). Written only when allowed, cost > 0 and not a peek.
--
-- TTL: the key must outlive e = t + ceil((full - u) / n), when the bucket is
-- full again. With a client clock every write sets PX =
-- ceil(reset_after_us / 1000) + slack ms. With the server clock (no now
-- in ARGV), a write that sets a TTL sets it to the end of the whole second
-- holding e, and records that second as d = whole seconds from t's second
-- (255 = not recorded); a write whose e falls in the second the state
-- records keeps the TTL (SET ... KEEPTTL): Redis expires keys by the clock
-- TIME reads, so that TTL still covers e. Setting a TTL is about a tenth of
-- the script's cost (issue 6); a key lives at most 1 s past its reset.


local full = capacity * p
local units, last
local v = redis.pcall('GET', key)
-- covered: the start (µs) of the second to whose end the TTL runs, if known.
local covered = false
if type(v) == 'string' then
  if #v == 17 then
    local d
    units, last, d = struct.unpack('<ddB', v)
    if d < 255 then covered = last - last % 1000000 + d * 1000000 end
  else
    local colon = string.find(v, ':', 1, true)
    if colon then units, last = tonumber(string.sub(v, 1, colon - 1)), tonumber(string.sub(v, colon + 1)) end
  end
elseif type(v) == 'table' then
  local old = redis.call('HMGET', key, 'u', 't')
  units, last = tonumber(old[1]), tonumber(old[2])
end
if units and last then
  if units > full then units = full end
else
  units, last = full, now
end
if now > last then
  local gained = (now - last) * n
  if gained >= full - units then units = full else units = units + gained end
end

local never = cost > capacity
local need = never and 0 or cost * p
local allowed = not never and units >= need
local after = allowed and units - need or units
-- ceil(a / n) on integers held in doubles: floor, then step up if short;
-- no division when n = 1 (every rate whose count divides its period).
local retry = -1
if not allowed and not never then
  retry = need - units
  if n ~= 1 then
    local a = retry
    retry = math.floor(a / n)
    if retry * n < a then retry = retry + 1 end
  end
end
local missing = full - after
local reset = missing
if n ~= 1 then
  reset = math.floor(missing / n)
  if reset * n < missing then reset = reset + 1 end
end

if allowed and cost > 0 and not peek then
  if now > last then last = now end
  local e = last + reset
  local second = e - e % 1000000
  local d = (second - (last - last % 1000000)) / 1000000
  if not server_clock or d > 254 then d = 255 end
  local value = struct.pack('<ddB', after, last, d)
  set_state(value, e, covered == second, reset)
end

return {allowed and 1 or 0, capacity, math.floor(after / p), reset, retry, 0, now}
