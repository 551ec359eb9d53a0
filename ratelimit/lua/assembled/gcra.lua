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
-- policy_gcra.lua: the gcra reader. Sets `burst` and the rate in lowest
-- terms, n units per p µs, from `policy` (lua/README.md).
local burst, n, p = struct_unpack('<ddd', policy)
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
