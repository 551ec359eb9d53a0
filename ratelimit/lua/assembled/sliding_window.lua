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
-- policy_sliding_window.lua: the sliding window's reader. Sets `precision`
-- (µs), `limits` and `windows` (µs), one entry per strategy in declared
-- order, from `policy` (lua/README.md), and, once per policy rather than
-- once per call, `spans` (each window in sub-windows), `widest` (the
-- most sub-windows a window holds: the ring's length), where the state's
-- totals and ring begin, whether a call reads and writes the ring whole,
-- and `ring`, which reads sub-windows' counts (sliding_window.lua).
local precision = struct_unpack('<d', policy)
local limits, windows, spans, widest = {}, {}, {}, 0
for i = 1, (#policy - 8) / 16 do
  limits[i], windows[i] = struct_unpack('<dd', policy, 16 * i - 7)
  spans[i] = math.floor(windows[i] / precision)
  if spans[i] > widest then widest = spans[i] end
end
-- The totals' and the ring's first byte, less one.
local totals_at = 24 + #policy
local ring_at = totals_at + 8 * #limits
-- Whether a call reads and writes the ring whole: a few sub-windows cost
-- less in one GET than in the commands that would read them apart.
local whole = widest <= 64

-- Where the counts of sub-windows from to to (to - from < widest) of `key`,
-- whose `state` was read, lie, as doubles in that order: the string holding
-- them and the first's byte. In a state read whole, in place unless the
-- ring wraps between them; else read by GETRANGE, once or twice as the
-- ring wraps. Made once per policy, not per call.
local function ring(state, key, from, to)
  local a, b = from % widest, to % widest
  if whole and a <= b then return state, ring_at + 8 * a + 1 end
  local x, y = ring_at + 8 * a, ring_at + 8 * b + 7
  if a <= b then return call('GETRANGE', key, string.format('%d', x), string.format('%d', y)), 1 end
  local last_byte = ring_at + 8 * widest
  if whole then return string.sub(state, x + 1, last_byte) .. string.sub(state, ring_at + 1, y + 1), 1 end
  return call('GETRANGE', key, string.format('%d', x), string.format('%d', last_byte - 1))
    .. call('GETRANGE', key, string.format('%d', ring_at), string.format('%d', y)), 1
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
-- sliding_window.lua: counts in sub-windows of `precision` P, aligned to
-- multiples of P; a strategy of window W sums the W/P most recent
-- sub-windows, the current one included. Twin: src/algo/sliding_window.rs.
--
-- Policy     policy_sliding_window.lua: precision, limits, windows, and
--            per strategy its span (W_i / P), and the widest.
-- Values     decide's (lua/README.md, "A call's values").
-- Returns    the window reply (window.lua).
--
-- State (one string of little-endian doubles): k, n (the newest sub-window
-- written, its index floor(t / P)), x (the ms of Redis's clock its TTL runs
-- to at least, -1 when unknown); then the policy's numbers it was written
-- under, as sent (P, then L_i, W_i); then k totals, strategy i's count over
-- (n - span_i, n]; then a ring of `widest` counts, sub-window j at slot
-- j % widest, holding j's count for n - widest < j <= n. So a call starts
-- from the totals: when it is later than n it subtracts the sub-windows
-- that left each window since n (each sub-window leaves once), never
-- reading a whole window but to find a denial's retry time.
--
-- A write records its time as the sub-window it counts in: a call is judged
-- at the start of n when now is earlier, so no call goes back before a
-- recorded one. Within one sub-window any time finds the same counts.
--
-- A state written under other numbers (another precision, other windows or
-- limits) is read whole: each live sub-window counted at another precision
-- moves to the sub-window of P holding its last microsecond, counts landing
-- together merged, so no permit counts for less time than it would have at
-- P; a write then writes the key afresh under this policy.
--
-- Written only when allowed, cost > 0 and not a peek. On Redis's clock,
-- when x already covers the reset, the TTL is kept; else it moves to the
-- reset plus up to a second (at most the widest window), recorded in x, so
-- a steady key sets its TTL about once a second and lives at most a second
-- past its reset. On a client's clock the TTL is always the reset plus the
-- slack, x = -1.
--
-- Redis's Lua hashes every byte of each string it makes, so a call brings
-- into Lua only the bytes it needs. A ring of few sub-windows (`whole`,
-- policy_sliding_window.lua) is read whole (GET) and written whole (SETRANGE key 0, keeping the TTL,
-- or SET ... PX): one read and one write of a few hundred bytes. A larger
-- ring is never read whole but for a denial's retry time or a state
-- written under other numbers: the call reads the head and totals and the
-- sub-windows it subtracts (GETRANGE), and writes the head and totals and
-- the sub-windows it changes (SETRANGE), with PEXPIRE when the TTL moves,
-- so its bytes and commands do not grow with the ring.
local current = math.floor(now / precision)
-- The whole state, or for a larger ring its head and totals (GETRANGE of
-- a missing key is empty).
local state
if whole then
  state = call('GET', key)
else
  state = call('GETRANGE', key, '0', string.format('%d', ring_at - 1))
  if state == '' then state = false end
end

local counts, newest, current_count = {}, nil, 0
-- n and x, when the state was written under this policy's numbers.
local last, expires = nil, -1
-- Otherwise the live sub-windows as {index, count}, oldest first.
local entries = {}

if state and #state == (whole and ring_at + 8 * widest or ring_at) and string.sub(state, 25, totals_at) == policy then
  local _
  _, last, expires = struct_unpack('<ddd', state)
  -- Judged at sub-window n if it is later than now's.
  if last > current then
    current = last
    now = last * precision
  end
  local gap = current - last
  for i = 1, k do
    local c = 0
    if gap < spans[i] then
      -- Sub-windows (n - span_i, current - span_i] left the window.
      c = struct_unpack('<d', state, totals_at + 8 * i - 7)
      if gap > 0 then
        local left, at = ring(state, key, last - spans[i] + 1, current - spans[i])
        for byte = at, at + 8 * (gap - 1), 8 do c = c - struct_unpack('<d', left, byte) end
      end
    end
    counts[i] = c
  end
  if gap == 0 then current_count = struct_unpack('<d', ring(state, key, current, current)) end
  if gap < widest then newest = last else last = nil end
else
  -- Written under other numbers: read whole, its live sub-windows moved
  -- to P.
  if state and not whole then state = call('GET', key) end
  if state then
    local was_k, was_last = struct_unpack('<dd', state)
    local was = struct_unpack('<d', state, 25)
    local was_widest = 0
    for i = 1, was_k do
      local span = math.floor(struct_unpack('<d', state, 25 + 16 * i) / was)
      if span > was_widest then was_widest = span end
    end
    local was_at = 32 + 24 * was_k
    local found = {}
    for j = was_last - was_widest + 1, was_last do
      local c = struct_unpack('<d', state, was_at + 8 * (j % was_widest) + 1)
      if c > 0 then
        local idx = j
        if was ~= precision then idx = math.floor(((j + 1) * was - 1) / precision) end
        local top = found[#found]
        if top and top[1] == idx then top[2] = top[2] + c else found[#found + 1] = {idx, c} end
      end
    end
    local top = found[#found]
    if top and top[1] > current then
      current = top[1]
      now = current * precision
    end
    for j = 1, #found do
      if found[j][1] + widest > current then entries[#entries + 1] = found[j] end
    end
  end
  for i = 1, k do counts[i] = 0 end
  for j = 1, #entries do
    local idx, c = entries[j][1], entries[j][2]
    newest = idx
    if idx == current then current_count = c end
    for i = 1, k do
      if idx + spans[i] > current then counts[i] = counts[i] + c end
    end
  end
end

local violated, never = judge(counts)
local taken = violated == 0 and cost or 0
if taken > 0 and (newest == nil or newest < current) then newest = current end

-- The key's reset and, with several strategies, each one's: sub-window
-- `newest` leaves strategy i at (newest + span_i) * P.
local reset, ends = 0, nil
if k > 1 then ends = {} end
if newest ~= nil then
  for i = 1, k do
    local e = (newest + spans[i]) * precision - now
    if e < 0 then e = 0 end
    if ends then ends[i] = e end
    if e > reset then reset = e end
  end
elseif ends then
  for i = 1, k do ends[i] = 0 end
end

-- Each violated strategy's retry: drop its sub-windows oldest first until
-- the cost fits.
local retry = -1
if violated ~= 0 and not never then
  retry = 0
  for i = 1, k do
    if violates(violated, i) then
      local left, passes_at, limit = counts[i], (current + 1) * precision, limits[i]
      if last then
        local from, to = current - spans[i] + 1, math.min(current, last)
        local counted, at = '', 1
        if to >= from then counted, at = ring(state, key, from, to) end
        for j = from, to do
          local c = struct_unpack('<d', counted, at + 8 * (j - from))
          if c > 0 then
            left = left - c
            passes_at = (j + spans[i]) * precision
            if left + cost <= limit then break end
          end
        end
      else
        for j = 1, #entries do
          local e = entries[j]
          if e[1] + spans[i] > current then
            left = left - e[2]
            passes_at = (e[1] + spans[i]) * precision
            if left + cost <= limit then break end
          end
        end
      end
      local r = passes_at - now
      retries[i] = r
      if r > retry then retry = r end
    end
  end
end

if taken > 0 and not peek then
  local ms = math.floor((reset + now - read_at + 999) / 1000) + slack
  if ms < 1 then ms = 1 end
  local kept = server_clock and last and expires >= read_at / 1000 + ms
  if not kept then
    if server_clock then
      ms = ms + math.min(math.floor(widest * precision / 1000), 1000)
      expires = math.floor(read_at / 1000) + ms
    else
      expires = -1
    end
  end
  local totals
  if k == 1 then
    totals = struct_pack('<d', counts[1] + taken)
  else
    totals = {}
    for i = 1, k do totals[i] = struct_pack('<d', counts[i] + taken) end
    totals = table.concat(totals)
  end
  local top = struct_pack('<ddd', k, current, expires)
  if last then
    -- The sub-windows after n get 0 (their slots held ones that left every
    -- window), the current one its count: contiguous slots, maybe wrapping.
    local bytes, from = struct_pack('<d', current_count + taken), current
    if current > last + 1 then bytes = string.rep('\0', 8 * (current - last - 1)) .. bytes end
    if current > last then from = last + 1 end
    local at, len, size = 8 * (from % widest), #bytes, 8 * widest
    if whole then
      local value
      if at + len <= size then
        value = top .. policy .. totals .. string.sub(state, ring_at + 1, ring_at + at) .. bytes
          .. string.sub(state, ring_at + at + len + 1)
      else
        local fits = size - at
        value = top .. policy .. totals .. string.sub(bytes, fits + 1)
          .. string.sub(state, ring_at + len - fits + 1, ring_at + at) .. string.sub(bytes, 1, fits)
      end
      if kept then call('SETRANGE', key, '0', value) else call('SET', key, value, 'PX', string.format('%d', ms)) end
    else
      call('SETRANGE', key, '0', top .. policy .. totals)
      if at + len <= size then
        call('SETRANGE', key, string.format('%d', ring_at + at), bytes)
      else
        local fits = size - at
        call('SETRANGE', key, string.format('%d', ring_at + at), string.sub(bytes, 1, fits))
        call('SETRANGE', key, string.format('%d', ring_at), string.sub(bytes, fits + 1))
      end
      if not kept then call('PEXPIRE', key, string.format('%d', ms)) end
    end
  elseif whole or #entries > 0 then
    local slots, zero = {}, string.rep('\0', 8)
    for j = 1, widest do slots[j] = zero end
    local counted = false
    for j = 1, #entries do
      local idx, c = entries[j][1], entries[j][2]
      if idx == current then
        c = c + taken
        counted = true
      end
      slots[idx % widest + 1] = struct_pack('<d', c)
    end
    if not counted then slots[current % widest + 1] = struct_pack('<d', taken) end
    call('SET', key, top .. policy .. totals .. table.concat(slots), 'PX', string.format('%d', ms))
  else
    -- A larger ring afresh: the head, the ring's last slot (Redis pads the
    -- bytes before it with zeros), then the one count.
    call('SET', key, top .. policy .. totals, 'PX', string.format('%d', ms))
    call('SETRANGE', key, string.format('%d', ring_at + 8 * widest - 8), string.rep('\0', 8))
    call('SETRANGE', key, string.format('%d', ring_at + 8 * (current % widest)), struct_pack('<d', taken))
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
