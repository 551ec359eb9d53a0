-- leaky_bucket.lua: starts empty, drains continuously; a call adds its cost
-- to the level and passes iff the level stays within capacity.
-- Twin: src/algo/leaky_bucket.rs.
--
-- One script per policy: loaded after the runtime's line of constants
--   local capacity, n, p = <capacity>, <n>, <p>
-- (capacity in requests; the rate in lowest terms, n units per p µs: one
-- request is p units, the bucket drains n units per µs; full = capacity * p),
-- policy_prelude.lua, which reads KEYS[1] and the optional ARGV (cost, peek,
-- now, slack) into `key`, `cost`, `peek`, `now` and `server_clock`; then
-- bucket_state.lua, which makes the new state from `reply`, `write` and
-- `missing`, and set_state.lua, which writes it with its TTL and replies.
-- Returns  struct.pack('<dd', v, now) (set_state.lua), v for the level
--          in units:
--            allowed  v = the level after the call (as if taken,
--                     for a peek or cost 0);
--            denied   v = -1 - the level as it stands;
--          the runtime rebuilds remaining, reset_after and retry_after
--          exactly from v, the cost and the constants
--          (src/backend/policy_reply.rs, the twin's formulas).
--
-- State on Redis: a 17-byte string, struct.pack('<ddB', l, t, d): l = level
-- in units, t = when it was last drained (µs), both integers below 2^53 held
-- exactly in doubles, and d (below) for the TTL. Binary, so reading and
-- writing it costs no number parsing or formatting (issue 6). One GET and
-- one SET, the fewest commands. An absent key is an empty bucket (l = 0,
-- t = now). Earlier versions' state is still read, and replaced by the next
-- write: the text "<l>:<t>" (18 bytes or more) and a hash ("l", "t"
-- fields). Written only when allowed, cost > 0 and not a peek.
--
-- TTL: the key must outlive e = t + ceil((l) / n), when the bucket is
-- empty again. With a client clock every write sets PX =
-- ceil(reset_after_us / 1000) + slack ms. With the server clock (no now
-- in ARGV), a write that sets a TTL sets it to the end of the whole second
-- holding e, and records that second as d = whole seconds from t's second
-- (255 = not recorded); a write whose e falls in the second the state
-- records keeps the TTL (SET ... KEEPTTL): Redis expires keys by the clock
-- TIME reads, so that TTL still covers e. Setting a TTL is about a tenth of
-- the script's cost (issue 6); a key lives at most 1 s past its reset.


local full = capacity * p
local level, last
local v = redis.pcall('GET', key)
-- covered: the start (µs) of the second to whose end the TTL runs, if known.
local covered = false
-- v: false (no key), the state, or an error table (WRONGTYPE: a hash).
if v then
  if #v == 17 then
    local d
    level, last, d = struct.unpack('<ddB', v)
    if d < 255 then covered = last - last % 1000000 + d * 1000000 end
  elseif type(v) == 'string' then
    local colon = string.find(v, ':', 1, true)
    if colon then level, last = tonumber(string.sub(v, 1, colon - 1)), tonumber(string.sub(v, colon + 1)) end
  else
    local old = redis.call('HMGET', key, 'l', 't')
    level, last = tonumber(old[1]), tonumber(old[2])
  end
end
if not (level and last) then
  level, last = 0, now
end
if now > last then
  local drained = (now - last) * n
  if drained >= level then level = 0 else level = level - drained end
end

-- A cost above capacity never passes (checked first: it may exceed 2^53).
-- For bucket_state.lua: `write`, and `missing`, the level left to drain
-- until the bucket is empty again after the call.
local reply, write, missing = -1 - level, false
if cost <= capacity and level + cost * p <= full then
  reply = level + cost * p
  write = cost > 0 and not peek
  missing = reply
end
