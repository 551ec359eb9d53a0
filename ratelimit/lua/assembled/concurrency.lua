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
-- policy_concurrency.lua: the concurrency reader. Sets `limit` and `lease`
-- (µs) from `policy` (lua/README.md).
local limit, lease = struct_unpack('<dd', policy)
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
-- concurrency.lua: at most `limit` permits held at once on a key, each a
-- lease. Twin: src/algo/concurrency.rs.
--
-- Policy     local limit, lease = <limit>, <lease µs>  (policy_concurrency.lua)
-- A call     decide's values (lua/README.md); `kind` 3 acquire, 4 release, 5 renew
--            the permit `permit` (its 16-byte id), `cost` its weight; any
--            other kind reports whether `cost` permits are free and holds
--            nothing.
-- Returns    the window reply (window.lua): allowed, limit, remaining,
--            reset_after_us, -1, 0, now, packed; remaining never below 0, reset_after_us until the
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
return struct_pack('<ddddddd', allowed and 1 or 0, limit, remaining, reset, -1, 0, now)
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
