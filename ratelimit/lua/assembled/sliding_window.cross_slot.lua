#!lua flags=allow-cross-slot-keys
local cross_slot = true
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
-- (fixed_window, sliding_window and its totals layout, sliding_log): what
-- they decide alike from their per-strategy counts.
--
-- The policy (policy_windows.lua) sets `limits` and `windows` (µs), one entry
-- per strategy in declared order.
--
-- Every window script returns the window reply, built by `window_reply`:
--   {allowed (1|0), limit, remaining, reset_after_us,
--    retry_after_us (-1 = none), violated (bit i-1 = strategy i),
--    now (µs: the time the call was judged at, see clock.lua)}
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
-- there are several).
local function window_reply(violated, counts, taken, reset, retry, ends)
  local best_limit, best_rem = 0, nil
  local reply = {violated == 0 and 1 or 0, 0, 0, reset, retry, violated, now}
  for i = 1, k do
    local rem = limits[i] - (counts[i] + taken)
    if rem < 0 then rem = 0 end
    if best_rem == nil or rem < best_rem then best_limit, best_rem = limits[i], rem end
    if k > 1 then reply[5 + 3 * i], reply[6 + 3 * i], reply[7 + 3 * i] = rem, ends[i], retries[i] or -1 end
  end
  reply[2], reply[3] = best_limit, best_rem
  return reply
end

-- Sets the key's TTL to outlive a reset `us` after `now` (the slack
-- added), counted from `read_at`: Redis expires keys by the time it reads.
local function expire_after(us)
  local ms = math.floor((us + now - read_at + 999) / 1000) + slack
  if ms < 1 then ms = 1 end
  call('PEXPIRE', key, string.format('%d', ms))
end
-- sub_windows.lua: joined after window.lua in both layouts of the sliding
-- window (sliding_window.lua, sliding_window_totals.lua): what they share.
--
-- Counts are kept in sub-windows of `precision` P (a constant, dividing
-- every window) aligned to multiples of P: a hash field per sub-window,
-- index floor(t / P) as a "%d" string -> its count. With current =
-- floor(now / P) and span_i = W_i / P, strategy i counts the fields with
-- current - span_i < index <= current. Fields with index + widest <= current
-- never count again; a write deletes those it finds.
--
-- A write records its time as the sub-window it counts in: a call is judged
-- at the start of the newest sub-window written when now is earlier
-- (`catch_up`), so no call goes back before a recorded one. Within one
-- sub-window any time finds the same counts.
--
-- Field "p" records the precision the fields were counted at ("P", or the
-- totals layout's "P:W_1:...:W_k"). Fields counted at another precision
-- are read as the sub-window holding their last microsecond (`moved`),
-- counts landing together merged, so no permit counts for less time than
-- it would have at P; a write then writes the key afresh (`rewrite`).
local current = math.floor(now / precision)
local spans, widest = {}, 0
for i = 1, k do
  spans[i] = math.floor(windows[i] / precision)
  if spans[i] > widest then widest = spans[i] end
end

-- Judges the call at sub-window `index` if it is later than now's.
local function catch_up(index)
  if index > current then
    current = index
    now = index * precision
  end
end

-- The precision field "p" (nil: none recorded) says the fields were counted at.
local function counted_at(p)
  local digits = p and string.match(p, '^%d+')
  return digits and tonumber(digits) or precision
end

-- Index `idx` of a sub-window counted at precision `was`, as an index at P.
local function moved(idx, was)
  if was == precision then return idx end
  return math.floor(((idx + 1) * was - 1) / precision)
end

-- Reads every field of `raw` (HGETALL's reply), moved to P and first
-- catching up with the newest index: the counts per strategy, the newest
-- live index (nil if none), the live entries as {index, count}, the current
-- sub-window's count, the fields to delete (dead ones, and those that are
-- neither an index nor "p" for which `drop(field)` says so) and whether the
-- fields were counted at another precision.
local function recount(raw, drop)
  local was = precision
  for j = 1, #raw, 2 do
    if raw[j] == 'p' then was = counted_at(raw[j + 1]) end
  end
  local found = {}
  for j = 1, #raw, 2 do
    local idx, c = tonumber(raw[j]), tonumber(raw[j + 1])
    if idx and c then
      idx = moved(idx, was)
      catch_up(idx)
      found[#found + 1] = {idx, c, raw[j]}
    end
  end
  local counts, newest, entries, current_count, stale = {}, nil, {}, 0, {}
  local at = {} -- index -> its entry, where counts moved together merge
  for i = 1, k do counts[i] = 0 end
  for j = 1, #found do
    local idx, c = found[j][1], found[j][2]
    if idx + widest <= current then
      stale[#stale + 1] = found[j][3]
    else
      if newest == nil or idx > newest then newest = idx end
      if at[idx] then
        at[idx][2] = at[idx][2] + c
      else
        at[idx] = {idx, c}
        entries[#entries + 1] = at[idx]
      end
      if idx == current then current_count = current_count + c end
      for i = 1, k do
        if idx + spans[i] > current then counts[i] = counts[i] + c end
      end
    end
  end
  for j = 1, #raw, 2 do
    if raw[j] ~= 'p' and not (tonumber(raw[j]) and tonumber(raw[j + 1])) and drop(raw[j]) then
      stale[#stale + 1] = raw[j]
    end
  end
  return counts, newest, entries, current_count, stale, was ~= precision
end

-- Strategy i's retry time from its live entries (any order): drop its
-- sub-windows oldest first until the cost fits.
local function retry_from_entries(entries, counts, i)
  table.sort(entries, function(a, b) return a[1] < b[1] end)
  local left, passes_at = counts[i], (current + 1) * precision
  for j = 1, #entries do
    local e = entries[j]
    if e[1] + spans[i] > current then
      left = left - e[2]
      passes_at = (e[1] + spans[i]) * precision
      if left + cost <= limits[i] then break end
    end
  end
  return passes_at - now
end

-- The key's reset and each strategy's, once `newest` is the newest index
-- after the call: its sub-window leaves strategy i at (newest + span_i) * P.
local function resets(newest)
  local reset, ends = 0, {}
  for i = 1, k do
    local e = 0
    if newest ~= nil then
      e = (newest + spans[i]) * precision - now
      if e < 0 then e = 0 end
    end
    ends[i] = e
    if e > reset then reset = e end
  end
  return reset, ends
end

-- Deletes `fields`, at most a thousand per command.
local function delete_fields(fields)
  for j = 1, #fields, 1000 do
    call('HDEL', key, unpack(fields, j, math.min(j + 999, #fields)))
  end
end

-- Writes the key afresh at P: the live `entries`, the current sub-window's
-- count raised by `taken`, then `extra` (field, value, ...); at most five
-- hundred fields per command.
local function rewrite(entries, taken, extra)
  call('DEL', key)
  local values, counted = {}, false
  for j = 1, #entries do
    local idx, c = entries[j][1], entries[j][2]
    if idx == current then
      c = c + taken
      counted = true
    end
    values[#values + 1] = string.format('%d', idx)
    values[#values + 1] = string.format('%d', c)
  end
  if not counted then
    values[#values + 1] = string.format('%d', current)
    values[#values + 1] = string.format('%d', taken)
  end
  for j = 1, #extra do values[#values + 1] = extra[j] end
  for j = 1, #values, 1000 do
    call('HSET', key, unpack(values, j, math.min(j + 999, #values)))
  end
end
-- sliding_window.lua: counts in sub-windows of `precision` P; a strategy of
-- window W sums the W/P most recent sub-windows, the current one included.
-- Twin: src/algo/sliding_window.rs. This is the hash layout: every call
-- reads every field, so the runtime uses it while windows hold few
-- sub-windows, and sliding_window_totals.lua beyond.
--
-- Policy     local precision, limits, windows = <P µs>, {<L_1>, ...}, {<W_1 µs>, ...}
-- Values     decide's (lua/README.md, "A call's values").
-- Returns    the window reply (window.lua).
--
-- State (a hash): sub_windows.lua's fields, and "p" = the precision P.
-- Written only when allowed, cost > 0 and not a peek (the current field
-- and "p", HDEL of dead ones; the whole key afresh when the fields were
-- counted at another precision), always followed by PEXPIRE to the reset.
-- A write deletes the totals layout's other fields: its totals would miss
-- this script's writes, and so the two layouts can follow each other on a
-- key.

local raw = call('HGETALL', key)
local counts, newest, entries, current_count, stale, converted = recount(raw, function() return true end)
local violated, never = judge(counts)
local taken = violated == 0 and cost or 0

if taken > 0 and (newest == nil or newest < current) then newest = current end
local reset, ends = resets(newest)

local retry = -1
if violated ~= 0 and not never then
  retry = 0
  for i = 1, k do
    if violates(violated, i) then
      local r = retry_from_entries(entries, counts, i)
      retries[i] = r
      if r > retry then retry = r end
    end
  end
end

if taken > 0 and not peek then
  local p = string.format('%d', precision)
  if converted then
    rewrite(entries, taken, {'p', p})
  else
    call('HSET', key, string.format('%d', current), string.format('%d', current_count + taken), 'p', p)
    delete_fields(stale)
  end
  expire_after(reset)
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
