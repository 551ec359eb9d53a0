#!lua flags=allow-cross-slot-keys
local cross_slot = true
-- head.lua: joined after the runtime's `local cross_slot = true|false`
-- (the script is flagged allow-cross-slot-keys; batch.lua reads it), and
-- before the function `decider` (prelude.lua): what the calls of one
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
-- policy_concurrency.lua: the concurrency reader (prelude.lua's `policy`).
local limit, lease = struct_unpack('<dd', policy)
return function(key, cost, kind, now, slack, permit)
-- prelude.lua: the contract every script shares. One script per family
-- of algorithm (ratelimit/src/backend/redis/family.rs), whatever the
-- policy: the policy's numbers travel with each call (prelude.lua).
--
-- The runtime makes a policy reader and, after it, this prelude and the
-- algorithm into one function, `decider(policy)`, which reads the policy
-- and returns the function `decide(key, cost, kind, now, slack, permit)`,
-- which decides one call on `key` under it; and joins batch.lua after it,
-- which reads each call's values from KEYS and ARGV (in the forms it
-- describes), makes a `decide` once per policy and calls it once per call.
--
-- KEYS[1]  the key of the (first) call: the one key Redis routes by.
-- A call's values:
--   policy  the policy's numbers, binary little-endian doubles, each an
--           integer held exactly, so reading them parses no text; the
--           reader, chosen by the family, sets them (for every call of
--           that policy: the locals `decide` reads):
--             policy_windows.lua  precision (µs; 0 but for a sliding
--                                 window), then each strategy's limit and
--                                 window (µs);
--             policy_bucket.lua   capacity, n, p (the rate in lowest terms:
--                                 n units per p µs); policy_gcra.lua the
--                                 same with the burst;
--             policy_counter.lua  the limit, then the window in ms as
--                                 decimal text (what PEXPIRE is given);
--   cost    integer >= 0 (may exceed 2^53: then it is above every limit,
--           and no script multiplies it before checking that);
--   kind    0 = a check; 1 = peek (decide, write nothing); 2 = refund (give
--           back up to cost permits of the call `permit` names, never past
--           an untouched state, and reply as a check of cost 0 would; sent
--           only to the scripts that keep refunds: fixed_window,
--           fixed_window_counter, token_bucket, leaky_bucket, gcra); for
--           the concurrency script, 3 = acquire, 4 = release, 5 = renew the
--           permit `permit`;
--   now     integer µs since the epoch, or nil: Redis's own clock (TIME,
--           read by clock.lua);
--   slack   TTL slack in ms added to every expiry (0 on Redis's clock);
--   permit  a concurrency call's permit id (16 bytes); for a refund, the
--           refunded call's times, struct.pack('<dd', taken, window end):
--           when it was judged and when its key would have been untouched
--           again (µs since the epoch); else nil.
-- Every value comes from the runtime, so none is ever malformed.
--
-- Sets `peek`, `refund` and `server_clock`; clock.lua sets `now` when nil.
local peek = kind == 1
local refund = kind == 2
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
-- concurrency.lua: at most `limit` permits held at once on a key, each a
-- lease. Twin: src/algo/concurrency.rs.
--
-- Policy     local limit, lease = <limit>, <lease µs>  (policy_concurrency.lua)
-- A call     prelude.lua's values; `kind` 3 acquire, 4 release, 5 renew
--            the permit `permit` (its 16-byte id), `cost` its weight; any
--            other kind reports whether `cost` permits are free and holds
--            nothing.
-- Returns    the window reply: {allowed, limit, remaining, reset_after_us,
--            -1, 0, now}, remaining never below 0, reset_after_us until the
--            last lease ends:
--              acquire  allowed when `cost` more fit; remaining after it;
--              release  allowed; the state after it (a permit not held
--                       gives nothing back, so releasing twice is once);
--              renew    allowed when the permit is still held, its lease
--                       then running again from now; 0 when its lease has
--                       ended: an ended lease is never taken again.
--
-- State (a sorted set): each permit held, member = id .. ':' .. weight,
-- score = the µs its lease ends (> 0); and the member '' whose score is
-- minus the permits held, so no count scans the set. A lease holds nothing
-- from its score on; a permit's call first drops the ended ones. The key
-- lives until the last lease ends (+ slack with a client clock).

local writes = kind >= 3
local held = -(tonumber(call('ZSCORE', key, '')) or 0)
local ended = call('ZRANGEBYSCORE', key, 1, now)
for i = 1, #ended do held = held - tonumber(string.match(ended[i], '(%d+)$')) end
local changed = writes and #ended > 0
if changed then call('ZREMRANGEBYSCORE', key, 1, now) end

local member = (permit or '') .. ':' .. string.format('%d', cost)
local fits = cost <= limit and held <= limit - cost
local allowed = true
if kind == 3 then
  allowed = fits
  if fits and cost > 0 then
    call('ZADD', key, now + lease, member)
    held = held + cost
    changed = true
  end
elseif kind == 4 then
  if call('ZREM', key, member) == 1 then
    held = held - cost
    changed = true
  end
elseif kind == 5 then
  allowed = call('ZSCORE', key, member) ~= false
  if allowed then
    call('ZADD', key, now + lease, member)
    changed = true
  end
else
  allowed = fits
  -- Reported as if taken: remaining after the call it answers for.
  if fits then held = held + cost end
end

local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
local reset = 0
if last[2] and tonumber(last[2]) > now then reset = last[2] - now end
if changed then
  if held <= 0 then
    call('DEL', key)
  else
    call('ZADD', key, -held, '')
    local ms = math.floor((reset + now - read_at + 999) / 1000) + slack
    if ms < 1 then ms = 1 end
    call('PEXPIRE', key, string.format('%d', ms))
  end
end
local remaining = limit - held
if remaining < 0 then remaining = 0 end
return {allowed and 1 or 0, limit, remaining, reset, -1, 0, now}
end
end
-- batch.lua: joined last in every script, after the function
-- `decider(policy)` (fragments.rs): reads the policy once and returns
-- `decide(key, cost, kind, now, slack, permit)`, which decides one call
-- under it (prelude.lua says what each value means). Here: the calls a
-- script call carries, and their values.
--
-- KEYS, ARGV  one call: its key KEYS[1] and at most five ARGV, as text, a
--             later one needing the earlier ones (the runtime leaves out
--             the trailing ones that are the common call's):
--               [1] policy; [2] cost (absent = 1); [3] kind, its digit
--               (absent = 0, a check), then 16 bytes for a concurrency
--               call (its permit's id) or a refund (the refunded call's
--               times, struct.pack('<dd', taken, window end)); [4] now (absent or empty = Redis's
--               clock); [5] slack (sent with [4]; absent = 0);
--             or a batch of m calls:
--               ARGV[1]  m, as text (shorter than any policy, so a batch
--                        is told from a single call);
--               ARGV[2]  the calls' words: empty when every call is the
--                        common call (cost 1, a check, Redis's clock), else
--                        m words of one width, call j's from byte
--                        (j - 1) * width: struct.pack('<dddd', cost, kind,
--                        now, slack), now = -1 for Redis's clock, then, 48
--                        bytes wide, the 16 bytes a single call's kind
--                        carries (read for kinds 2 to 5 only);
--               the keys: every key declared, where the server takes that
--                        (one server, Sentinel): call j's is KEYS[j]; or
--                        only KEYS[1] declared (a cluster node takes
--                        declared keys of one slot only): all m keys follow,
--                        call j's at ARGV[2 + j];
--               then the policies: one, every call's, or one per call.
-- Returns     for one call, its reply as the algorithm's header says; for a
--             batch whose calls all answered with the bucket reply
--             (set_state.lua), the m replies' 16 bytes joined in order into
--             one string; else a table of the m replies in order, in the
--             place of a call that failed (its key holds another type of
--             value) a table of one string, its error (no reply of an
--             algorithm has that shape; an error element would fail the
--             whole batch in clients); or the error NONLOCAL, having
--             decided nothing (see below).
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
  -- The bucket reply's two numbers (set_state.lua), packed.
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
-- A bucket reply's two numbers (set_state.lua) go to `numbers`, packed at
-- the end: a batch of them all answered is one pack, one string.
local replies, numbers, joined = {}, {}, true

-- A call's place in `replies` when it did not answer with the bucket reply:
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
