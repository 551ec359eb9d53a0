local cross_slot = false
-- head.lua: joined after the runtime's `local cross_slot = true|false`
-- (the script is flagged allow-cross-slot-keys; batch.lua reads it), and
-- before the function `decider` (lua/README.md): what the calls of one
-- script call share.

-- The library functions every call uses, as locals of the script: a
-- global's field is two table lookups at every use. Only the fixed windows
-- (fixed_window.lua, fixed_window_counter.lua) call `try`: the other
-- scripts share this head and leave it unread.
-- luacheck: push ignore 211/try
local call, try, struct_pack, struct_unpack = redis.call, redis.pcall, struct.pack, struct.unpack
-- luacheck: pop

-- Redis's clock in µs, read once per script call: Redis itself expires keys
-- by one time for a whole script, and the calls of a batch waited together,
-- so judging them at one time is judging them as if they came in the same µs.
local time_read = false
local function redis_time()
  if not time_read then
    local t = call('TIME')
    time_read = t[1] * 1000000 + t[2]
  end
  return time_read
end
local function decider(policy)
-- policy_bucket.lua: the token and leaky bucket reader. Sets `capacity`,
-- the rate in lowest terms, n units per p µs, and `step`, the µs the
-- refill steps by (1, continuous; a token bucket refilled by interval, its
-- rate's period, counted from the epoch), from `policy` (lua/README.md).
local capacity, n, p, step = struct_unpack('<dddd', policy)
return function(key, cost, kind, now, slack, permit)
-- prelude.lua: opens `decide(key, cost, kind, now, slack, permit)` in every
-- script, after the family's policy reader has set the policy's numbers
-- (lua/README.md: how a script is joined, and what each value means).
--
-- Sets `peek`, `refund`, `charge` and `server_clock`; clock.lua sets
-- `now` when nil.
local peek = kind == 1
local refund = kind == 2
local charge = kind == 6
local server_clock = not now
-- clock.lua: joined after prelude.lua in every script that reads a time
-- (all but fixed_window_counter.lua, whose window Redis times by the key's
-- TTL): Redis's clock when the call sent none.
--
-- Sets `read_at`, the time read (the call's `now`, or TIME once per script call:
-- head.lua's `redis_time`). The algorithm then
-- moves `now` up to the latest time its state records, if that is later,
-- so no call is judged before one already recorded for the key and a late
-- call can never reopen capacity; `now` is the time judged at and replied.
-- TTLs are set from `read_at`, as Redis expires keys by the time it reads.
if server_clock then now = time_read or redis_time() end
local read_at = now
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
-- bucket_state.lua: joined after token_bucket.lua or leaky_bucket.lua and
-- before set_state.lua, so both buckets make their new state (bucket_read.lua's
-- format) the same way.
--
-- The bucket leaves:
--   reply    the units held (token) or the level (leaky) after the call;
--   write    the call is admitted, costs something and is not a peek; or
--            it is a refund that gave something back; or a check or refund
--            found the state at another rate, still owing (converted);
--   missing  the units until the bucket is untouched again (full, or
--            empty): what it owes, the state's m;
--   last     when its units were last counted (µs), at most now (the
--            time judged at, which this write records); covered as it says.
-- Sets, for set_state.lua: value (the state, 33 bytes, or 41 with an
-- interval refill's step; or false), e (when the
-- bucket is untouched again, µs), reset (e - last, rounded up) and kept.
--
-- With the server clock a TTL runs to the end of e's whole second, and the
-- state records that second as d = whole seconds from t's second (255 = not
-- recorded), so the next write in the same second can keep the TTL.
local value, e, reset, kept = false
if write then
  last = now
  -- reset = ceil(missing / n): no division when n = 1 (every rate whose
  -- count divides its period), else floor, then step up if short, on
  -- integers held in doubles.
  reset = missing
  if n ~= 1 then
    reset = math.floor(missing / n)
    if reset * n < missing then reset = reset + 1 end
  end
  -- By interval, paid at the end of the period that pays the last unit
  -- (algo::paid_after).
  if step ~= 1 and reset > 0 then
    local periods = math.floor(reset / step)
    if periods * step < reset then periods = periods + 1 end
    reset = periods * step - last % step
  end
  e = last + reset
  local second = e - e % 1000000
  local d = (second - (last - last % 1000000)) / 1000000
  if not server_clock or d > 254 then d = 255 end
  if step == 1 then
    value = struct_pack('<ddBdd', missing, last, d, p, n)
  else
    value = struct_pack('<ddBddd', missing, last, d, p, n, step)
  end
  kept = covered == second
end
-- set_state.lua: joined last in the scripts whose state is one string
-- (token_bucket, leaky_bucket, gcra), so each writes its state and replies
-- the same way.
--
-- The algorithm leaves:
--   reply  its one number: >= 0 allowed, < 0 denied (the script's header
--          says what it counts); an integer below 2^53 held in a double;
--   value  the new state (a string), or false when nothing is written;
--   e      when the written state is untouched again (µs), and
--   reset  e - now rounded up to whole µs;
--   kept   the key's TTL already runs to the end of e's second, and the
--          key holds a state as long as `value`.
-- Writes `value` to `key`, its TTL counted from `read_at` (clock.lua):
--   with the server clock, the TTL runs to the end of e's whole second;
--   when `kept` (a write in the same second), SETRANGE key 0 value
--   overwrites the whole state and leaves the TTL (its integer reply costs
--   Lua less than the table SET's OK becomes), else SET ... PX sets it.
--   Redis expires keys by the clock TIME reads, so a kept TTL still covers
--   e, and a key lives at most 1 s past its reset;
--   with a client clock, always PX = ceil((e - read_at) / 1000) + slack.
--
-- Returns  the bucket reply as two numbers, `reply, now`, which batch.lua
--          packs as struct.pack('<dd', reply, now), 16 bytes, two
--          little-endian doubles holding integers exactly (a batch's all in
--          one pack, joined in order). The runtime
--          rebuilds every field of the decision from `reply`, the cost and
--          the policy's numbers (ratelimit/src/backend/redis/reply.rs, by
--          the twins' formulas); `now` is the time the call was judged at
--          (Redis's, on its own clock).
if value then
  if kept and server_clock then
    call('SETRANGE', key, '0', value)
  else
    local ms
    if server_clock then
      ms = math.floor((e - e % 1000000 + 1000999 - read_at) / 1000)
    else
      ms = math.floor((e - read_at + 999) / 1000) + slack
    end
    if ms < 1 then ms = 1 end
    call('SET', key, value, 'PX', string.format('%d', ms))
  end
end
return reply, now
end
end
-- batch.lua: joined last in every script, after the function
-- `decider(policy)`, which reads a policy once and returns `decide`, which
-- decides one call under it. Here: the calls a script call carries, one or
-- a batch, read from KEYS and ARGV, and the script's reply, in the forms
-- lua/README.md gives ("KEYS and ARGV", "Replies"): one call's reply as
-- its algorithm answers it; a batch's bucket replies joined into one
-- string, or a table of its replies, a failed call's its error's one
-- string in a table; or the error NONLOCAL, having decided nothing.
-- The calls of a batch are decided one after another, so a key that appears
-- twice sees its own earlier decision, exactly as separate script calls
-- would. On a cluster the script is flagged allow-cross-slot-keys
-- (`cross_slot` is set), which lets it reach keys of the node's other slots.

if #ARGV[1] >= 8 then
  local cost, kind, slack, permit = 1, 0, 0, nil
  if ARGV[2] then cost = ARGV[2] + 0 end
  if ARGV[3] then
    kind = string.byte(ARGV[3]) - 48
    if #ARGV[3] > 1 then permit = string.sub(ARGV[3], 2) end
  end
  if ARGV[5] then slack = ARGV[5] + 0 end
  local reply, now = decider(ARGV[1])(KEYS[1], cost, kind, tonumber(ARGV[4]), slack, permit)
  -- The bucket or counter reply's two numbers, packed.
  if now then return struct_pack('<dd', reply, now) end
  return reply
end

local m, words = tonumber(ARGV[1]), ARGV[2]
local width = #words / m
-- Call j's key is ARGV[key_at + j], or KEYS[j] when every key is declared.
local key_at, policy_at = false, 2
if #KEYS == 1 then key_at, policy_at = 2, m + 2 end
local shared = #ARGV == policy_at + 1

-- The runtime groups a cluster batch by the slots it last learnt; if they
-- moved, a key may now be on another node, and touching it would fail the
-- script after the calls before it had written. So every key is tried
-- first, and a batch with a key of another node is refused whole.
if cross_slot then
  for j = 2, m do
    local found = redis.pcall('EXISTS', ARGV[key_at + j])
    if type(found) == 'table' and found.err then
      return redis.error_reply('NONLOCAL a key of this batch is not served by this node')
    end
  end
end

-- Call j's values after its key, from its word.
local function word(j)
  local at = (j - 1) * width + 1
  local cost, kind, now, slack = struct_unpack('<dddd', words, at)
  if now < 0 then now = nil end
  local permit = nil
  if kind >= 2 then permit = string.sub(words, at + 32, at + 47) end
  return cost, kind, now, slack, permit
end

-- Each call on its own: its failure is its reply, not the batch's. A call
-- fails at its first read, before it writes, so a failed call took nothing.
-- One decide per run of calls with the same policy: a policy is read once.
local keys, argv = KEYS, ARGV
-- A bucket or counter reply's two numbers go to `numbers`, packed at
-- the end: a batch of them all answered is one pack, one string.
local replies, numbers, joined = {}, {}, true

-- A call's place in `replies` when it did not answer with two numbers:
-- its failure as a table of its one string, or its reply.
local function settled(ok, reply)
  joined = false
  if ok then return reply end
  if type(reply) == 'table' and reply.err then return {reply.err} end
  return {tostring(reply)}
end

if shared and width == 0 and not key_at then
  -- The common batch: one policy, every call the common call, every key
  -- declared, so its loop reads nothing but each key (every bytecode
  -- counts, once per call).
  local decide = decider(argv[policy_at + 1])
  for j = 1, m do
    local ok, reply, now = pcall(decide, keys[j], 1, 0, nil, 0)
    if ok and now then numbers[2 * j - 1], numbers[2 * j] = reply, now else replies[j] = settled(ok, reply) end
  end
else
  local read_policy, decide = false, false
  for j = 1, m do
    local policy = argv[policy_at + (shared and 1 or j)]
    if policy ~= read_policy then read_policy, decide = policy, decider(policy) end
    local key = key_at and argv[key_at + j] or keys[j]
    local ok, reply, now
    -- The common call's word is empty, so it needs no unpacking.
    if width == 0 then
      ok, reply, now = pcall(decide, key, 1, 0, nil, 0)
    else
      ok, reply, now = pcall(decide, key, word(j))
    end
    if ok and now then numbers[2 * j - 1], numbers[2 * j] = reply, now else replies[j] = settled(ok, reply) end
  end
end
if joined then return struct_pack('<' .. string.rep('d', 2 * m), unpack(numbers)) end
if next(numbers) then
  for j = 1, m do
    if numbers[2 * j] then replies[j] = struct_pack('<dd', numbers[2 * j - 1], numbers[2 * j]) end
  end
end
return replies
