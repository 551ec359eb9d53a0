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
-- policy_windows.lua: the windows reader. Sets `precision` (µs; 0 but for
-- a sliding window), then `limits` and `windows` (µs), one entry per
-- strategy in declared order, from `policy` (lua/README.md). A fixed
-- window with calendar strategies sends -1 for the precision, then a third
-- number per strategy: `opens`, where the calendar window holding the call
-- begins (µs; its `windows` entry is that window's length), -1 for a
-- window started by a key's first hit (left nil).
local precision = struct_unpack('<d', policy)
local limits, windows, opens = {}, {}, {}
if precision < 0 then
  for i = 1, (#policy - 8) / 24 do
    local open
    limits[i], windows[i], open = struct_unpack('<ddd', policy, 24 * i - 15)
    if open >= 0 then opens[i] = open end
  end
else
  for i = 1, (#policy - 8) / 16 do
    limits[i], windows[i] = struct_unpack('<dd', policy, 16 * i - 7)
  end
end
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
-- window.lua: joined after clock.lua in the three window scripts
-- (fixed_window, sliding_window, sliding_log): what
-- they decide alike from their per-strategy counts.
--
-- The policy (policy_windows.lua) sets `limits` and `windows` (µs), one entry
-- per strategy in declared order.
--
-- Every window script returns the window reply, built by `window_reply`,
-- its numbers packed as little-endian doubles (a table reply costs Redis
-- more to hand back than a string):
--   allowed (1|0), limit, remaining, reset_after_us,
--   retry_after_us (-1 = none), violated (bit i-1 = strategy i),
--   now (µs: the time the call was judged at, see clock.lua)
-- where limit and remaining are the strategy with the least room; only
-- when there are several strategies, followed by one triple per strategy
-- (declared order): remaining_i, reset_after_us_i after the call, and
-- retry_after_us_i, when that strategy alone would let the call pass
-- (-1 = not violated, or no wait helps).
local k = #limits

-- Each violated strategy's own retry time, set by the script while it
-- finds the call's (the latest of them); read only when k > 1.
local retries = {}

-- Which strategies a call of `cost` violates, from each one's count before
-- the call: the bits of `violated`, and whether some limit is below the
-- cost (then no wait would help: no retry time).
local function judge(counts)
  local violated, never, bit = 0, false, 1
  for i = 1, k do
    if cost > limits[i] then never = true end
    if counts[i] + cost > limits[i] then violated = violated + bit end
    bit = bit * 2
  end
  return violated, never
end

-- Whether strategy i's bit is set in `violated`.
local function violates(violated, i)
  local bit = 2 ^ (i - 1)
  return violated % (bit * 2) >= bit
end

-- The reply: `counts` before the call, `taken` what the call took (0 when
-- denied), `ends` each strategy's reset after the call (read only when
-- there are several). Its head is packed by a literal format and the
-- triples appended: no table, no format made per call.
local function window_reply(violated, counts, taken, reset, retry, ends)
  local best_limit, best_rem, triples = 0, nil, ''
  for i = 1, k do
    local rem = limits[i] - (counts[i] + taken)
    if rem < 0 then rem = 0 end
    if best_rem == nil or rem < best_rem then best_limit, best_rem = limits[i], rem end
    if k > 1 then triples = triples .. struct_pack('<ddd', rem, ends[i], retries[i] or -1) end
  end
  return struct_pack('<ddddddd', violated == 0 and 1 or 0, best_limit, best_rem, reset, retry, violated, now) .. triples
end

-- Sets the key's TTL to outlive a reset `us` after `now` (the slack
-- added), counted from `read_at`: Redis expires keys by the time it reads.
local function expire_after(us)
  local ms = math.floor((us + now - read_at + 999) / 1000) + slack
  if ms < 1 then ms = 1 end
  call('PEXPIRE', key, string.format('%d', ms))
end
-- fixed_window.lua: per strategy, a window of W started by the first admitted
-- hit after the previous window ended, or, for a calendar strategy, the
-- day, week, month or year of its zone holding the call, whose bounds the
-- client sends (opens[i], opens[i] + windows[i]); pass iff every strategy
-- has count + cost <= limit. Twin: src/algo/fixed_window.rs.
--
-- Policy     local limits, windows, opens = {<L_1>, ...}, {<W_1 µs>, ...},
--            {<calendar start µs or nil>, ...}  (policy_windows.lua)
-- Values     decide's (lua/README.md, "A call's values").
-- Returns    the window reply (window.lua).
--
-- State (a hash): for strategy i (1-based) "s<i>" = window start µs, "c<i>"
-- = count in that window, "w<i>" = its length (µs) under the policy that
-- last wrote it. The call is judged at the latest start if now is
-- earlier (clock.lua), so a window covers now iff now < its end
-- (half-open): start + W, or for a calendar strategy (`ends_at`) the
-- calendar window's end if it began inside it, none if it began before
-- (it ended), and start + its "w<i>" if it began after (a client clock
-- behind the one that wrote it). A calendar window starts at its bound,
-- not at the call, and records its own length (a day's follows the clock
-- changes). Written only when allowed, cost > 0 and not a peek; by a
-- denied check (cost within every limit) under a window longer than a
-- running one's "w<i>": that window runs on by the longer, so "w<i>" takes
-- it and the TTL its end, unless a window the key holds ends later; and by
-- a refund, which lowers by cost, never below zero, the count of each
-- window still running that counted the refunded call, taken at `taken`
-- (its start <= taken < start + W), then replies as a check of cost 0
-- (HSET of those counts; the TTL already covers their ends). A window
-- that ended, or began after the refunded call's ended, gives nothing
-- back: it holds none of that call's permits. A charge counts its cost
-- in every running window (starting those that run none) whatever the
-- room, past the limit, as an admitted call does, then replies as a check
-- of cost 0. A write that starts any
-- window, or meets another form or length, rewrites every field, then
-- sets the TTL to the latest window's end; a write inside live windows of
-- the policy's lengths only adds the cost to each count (HINCRBY), the
-- TTL already covering the latest window's end. A call inside live
-- windows needs no time recorded: judged at any time from the latest
-- start on, it finds the same windows.
--
-- Windows beyond the policy's k ("s<k+1>" on: an earlier policy of this
-- name had more strategies) are kept: each runs by its own "w<j>", never
-- judges, and counts every admitted call while it runs (the same add), so
-- a policy regaining that strategy finds every call made since. A refund
-- lowers them by the same rule. A write keeps them all but the trailing
-- ones that ended, and the TTL covers the last one's end. Read whole
-- (HGETALL) only when "s<k+1>" exists.
--
-- The key may instead hold fixed_window_counter.lua's integer (the same
-- key: a policy of this name with one strategy, on Redis's clock), W' *
-- 2^21 + count: it is the first strategy's window, taken to start W'
-- before the counter's TTL surely ends (never after now), the other
-- strategies having none. A refund lowers it by the counter's rule (SET
-- ... KEEPTTL); a write turns it into this hash.

-- The counter's unit of window (fixed_window_counter.lua's).
local per_ms = 2097152

-- When a window of strategy i that began at s, recorded with length w, ends
-- at this call (src/algo/fixed_window.rs, `Rule::end`).
local function ends_at(i, s, w)
  local from = opens[i]
  if not from then return s + windows[i] end
  if s < from then return s end
  if s < from + windows[i] then return from + windows[i] end
  return s + w
end

-- s<i>, c<i>, w<i> for every strategy, and s<k+1>: present only if an
-- earlier policy under this name had more strategies, whose windows run on.
local fields = {}
for i = 1, k do
  fields[3 * i - 2], fields[3 * i - 1], fields[3 * i] = 's' .. i, 'c' .. i, 'w' .. i
end
fields[3 * k + 1] = 's' .. (k + 1)
local h = try('HMGET', key, unpack(fields))
-- The counter's form: HMGET fails on it, having read nothing.
local counter = h.err and tonumber(call('GET', key))
local written = 0
if h.err then
  h = {}
  if counter then
    written = math.floor(counter / per_ms)
    counter = counter - written * per_ms
    -- No TTL (-1): as a window starting now, as the counter takes it.
    local t, s = call('PTTL', key) + 1, now
    if t > 0 then s = read_at + t * 1000 - written * 1000 end
    if s > now then s = now end
    h[1], h[2], h[3] = s, counter, written * 1000
  end
end

-- The windows beyond k: {start, count, length} per index, from k + 1 on.
local kept, last = {}, k
if h[3 * k + 1] then
  local all, f = call('HGETALL', key), {}
  for i = 1, #all, 2 do f[all[i]] = tonumber(all[i + 1]) end
  while f['s' .. (last + 1)] do
    last = last + 1
    kept[last] = {f['s' .. last], f['c' .. last] or 0, f['w' .. last] or 0}
  end
end
for j = k + 1, last do
  if kept[j][1] > now then now = kept[j][1] end
end

for i = 1, k do
  local s, c = tonumber(h[3 * i - 2]), tonumber(h[3 * i - 1])
  if s and c and s > now then now = s end
end
-- Whether each kept window runs at now.
local runs = {}
for j = k + 1, last do
  runs[j] = now - kept[j][1] < kept[j][3]
end
-- The running windows: start, count and the length each runs by.
local starts, counts, lens = {}, {}, {}
for i = 1, k do
  local s, c = tonumber(h[3 * i - 2]), tonumber(h[3 * i - 1])
  local e = s and c and ends_at(i, s, tonumber(h[3 * i]) or 0)
  if e and now < e then
    starts[i], counts[i], lens[i] = s, c, e - s
  else
    starts[i], counts[i] = false, 0
  end
end
if refund and counter then
  local _, window_end = struct_unpack('<dd', permit)
  -- fixed_window_counter.lua's margin, for a window timed to the ms.
  if starts[1] and read_at + 2000 < window_end and cost > 0 and counts[1] > 0 then
    if cost >= counts[1] then counts[1] = 0 else counts[1] = counts[1] - cost end
    call('SET', key, string.format('%d', written * per_ms + counts[1]), 'KEEPTTL')
  end
  cost = 0
elseif refund then
  local taken = struct_unpack('<d', permit)
  local args = {}
  for i = 1, k do
    local s = starts[i]
    if s and s <= taken and taken - s < lens[i] and cost > 0 and counts[i] > 0 then
      if cost >= counts[i] then counts[i] = 0 else counts[i] = counts[i] - cost end
      local j = #args
      args[j + 1], args[j + 2] = 'c' .. i, string.format('%d', counts[i])
    end
  end
  for j = k + 1, last do
    local s, c = kept[j][1], kept[j][2]
    if runs[j] and s <= taken and taken - s < kept[j][3] and cost > 0 and c > 0 then
      if cost >= c then c = 0 else c = c - cost end
      local n = #args
      args[n + 1], args[n + 2] = 'c' .. j, string.format('%d', c)
    end
  end
  if #args > 0 then call('HSET', key, unpack(args)) end
  cost = 0
end
local violated, never = judge(counts)
local allowed = violated == 0
local taken = allowed and cost or 0
-- A charge takes its cost whatever the room, at most 2^52 at once
-- (algo::charged), counted past the limit.
if charge then
  taken = cost
  if taken > 4503599627370496 then taken = 4503599627370496 end
end

-- The windows after the call (as if taken, also for a peek).
local starting = false
local reset, ends, after = 0, {}, {}
for i = 1, k do
  local s = starts[i]
  if taken > 0 and not s then
    s = opens[i] or now
    lens[i] = ends_at(i, s, 0) - s
    starting = true
  end
  after[i] = s
  local e = 0
  if s then
    e = s + lens[i] - now
    if e > reset then reset = e end
    if e < 0 then e = 0 end
  end
  ends[i] = e
end

if taken > 0 and not peek then
  local same = true
  for i = 1, k do
    if tonumber(h[3 * i]) ~= lens[i] then same = false end
  end
  if starting or last > k or counter or not same then
    -- The kept windows up to the last that runs, each counting the call.
    local keep, until_us = k, reset
    for j = k + 1, last do
      if runs[j] then
        keep = j
        local e = kept[j][1] + kept[j][3] - now
        if e > until_us then until_us = e end
      end
    end
    if last > k or counter then call('DEL', key) end
    local args = {}
    for i = 1, k do
      local n = #args
      args[n + 1], args[n + 2] = 's' .. i, string.format('%d', after[i])
      args[n + 3], args[n + 4] = 'c' .. i, string.format('%d', counts[i] + taken)
      args[n + 5], args[n + 6] = 'w' .. i, string.format('%d', lens[i])
    end
    for j = k + 1, keep do
      local c = kept[j][2]
      if runs[j] then c = c + taken end
      local n = #args
      args[n + 1], args[n + 2] = 's' .. j, string.format('%d', kept[j][1])
      args[n + 3], args[n + 4] = 'c' .. j, string.format('%d', c)
      args[n + 5], args[n + 6] = 'w' .. j, string.format('%d', kept[j][3])
    end
    call('HSET', key, unpack(args))
    expire_after(until_us)
  else
    local by = string.format('%d', taken)
    for i = 1, k do
      call('HINCRBY', key, 'c' .. i, by)
    end
  end
end

-- A charge replies as a check of cost 0 on the windows it wrote.
if charge then
  for i = 1, k do
    if after[i] then starts[i], counts[i] = after[i], counts[i] + taken end
  end
  cost, taken = 0, 0
  violated, never = judge(counts)
  allowed = violated == 0
end

-- Retry (denials only, from the windows before the call, or a
-- charge's after it): when every
-- violated strategy's window has ended.
local retry = -1
if not allowed and not never then
  retry = 0
  for i = 1, k do
    if violates(violated, i) and starts[i] then
      local e = starts[i] + lens[i] - now
      retries[i] = e
      if e > retry then retry = e end
    end
  end
end

-- A denied check by a window longer than a running one's own length: that
-- window runs on by the longer, so the key is kept to its end (the twin's
-- rule: the TTL moves only if every window the key holds ends by then).
if not allowed and not peek and not refund and not charge and cost > 0 and not never then
  local args, lengths = {}, {}
  for i = 1, k do
    lengths[i] = tonumber(h[3 * i]) or 0
    if starts[i] and lengths[i] < lens[i] then
      lengths[i] = lens[i]
      args[#args + 1], args[#args + 2] = 'w' .. i, string.format('%d', lens[i])
    end
  end
  if #args > 0 then
    if counter then
      -- The counter becomes this hash: its one window, by the longer length.
      call('DEL', key)
      args = {'s1', string.format('%d', starts[1]), 'c1', string.format('%d', counts[1]), 'w1', args[2]}
    end
    call('HSET', key, unpack(args))
    local within = true
    for i = 1, k do
      local s = tonumber(h[3 * i - 2])
      if s and now - s < lengths[i] and s + lengths[i] > now + reset then within = false end
    end
    for j = k + 1, last do
      if runs[j] and kept[j][1] + kept[j][3] > now + reset then within = false end
    end
    if within then expire_after(reset) end
  end
end

return window_reply(violated, counts, taken, reset, retry, ends)
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
