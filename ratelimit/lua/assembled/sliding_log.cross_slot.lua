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
-- sliding_log.lua: an exact log of admitted calls, one entry per call (not
-- per permit), so a call's work never depends on its cost: one GET, at most
-- one write, and bisections of the log in Lua, O(log n) entries read of n
-- held. An entry at s counts for window W while now - s < W (half-open).
-- Twin: src/algo/sliding_log.rs.
--
-- Policy     local limits, windows = {<L_1>, ...}, {<W_1 µs>, ...}  (policy_windows.lua)
-- Values     decide's (lua/README.md, "A call's values").
-- Returns    the window reply (window.lua).
--
-- State (a string of 16-byte records, each struct.pack('<dd', ...)): the
-- head (lasts, base), then one entry (at, through) per admitted call in
-- time order: the µs it was admitted at, and the running total of permits
-- through it since the log started; base is the total before the first
-- entry, so an entry's weight is its total less the record's before it.
-- Times strictly increase, and so do totals: a call is judged at the
-- newest entry's time if now is earlier (clock.lua), and a call admitted
-- at the newest entry's very µs joins that entry. Strategy i counts
-- total - the total before the oldest entry with s > now - W_i (found by
-- bisecting), total being the newest's. Written only when allowed, cost > 0
-- and not a peek: the entry APPENDed (or SETRANGE over the newest it
-- joins), one command, or the key written afresh (SET ... PX), without the
-- entries no window counts (s <= now - widest), when it is new, every entry
-- left the windows, the dead outnumber the live, totals are lowered, or the
-- TTL must move. On Redis's clock `lasts` is when the TTL ends (µs, TIME's
-- clock): a write needs the key past now + widest, else writes it afresh
-- with a TTL to now + 2 widest, so the TTL moves about once per widest
-- window and a key lives at most a widest window past its reset. On
-- a client clock `lasts` is 0 (unknown) and every write sets PEXPIRE to the
-- reset plus the slack.
--
-- At most `max_entries` live entries (src/algo/sliding_log.rs,
-- MAX_ENTRIES): a call admitted when the log is full joins the newest
-- entry, which takes the call's time, so that weight counts until the
-- later call leaves: a full log errs toward denying. When the oldest live
-- entry's total before it reaches 2^48, every total is lowered by it,
-- keeping totals exact in doubles.
local max_entries = 1000
local rebase_from = 2 ^ 48

local widest = 0
for i = 1, k do
  if windows[i] > widest then widest = windows[i] end
end

-- Entry j's time is the double at byte 16 j + 1 and its total at 16 j + 9,
-- so the total before entry j (base for the first) is at 16 j - 7.
local log = call('GET', key)
local size, newest_at, total = 0, nil, 0
if log then
  size = #log / 16 - 1
  newest_at, total = struct_unpack('<dd', log, 16 * size + 1)
  if newest_at > now then now = newest_at end
end
-- Whether some entry is still in the widest window.
local alive = newest_at and newest_at + widest > now

-- Entries no window counts any more: all before the widest window's first.
local dead = size
local counts = {}
for i = 1, k do
  local window, c = windows[i], 0
  if newest_at and newest_at + window > now then
    -- The first entry the window counts (they are a suffix of the log, the
    -- newest among them), by bisecting: no C call but struct's per step.
    local lo, hi = 1, size
    while lo < hi do
      local mid = lo + hi
      mid = (mid - mid % 2) / 2
      if struct_unpack('<d', log, 16 * mid + 1) + window > now then hi = mid else lo = mid + 1 end
    end
    if window == widest then dead = lo - 1 end
    c = total - struct_unpack('<d', log, 16 * lo - 7)
  end
  counts[i] = c
end
local violated, never = judge(counts)
local taken = violated == 0 and cost or 0

-- Reset: when the newest entry leaves the window; a call that takes is
-- the newest, at now.
-- Each strategy's (`ends`) is replied only when there are several.
local reset, ends = 0, k > 1 and {} or nil
for i = 1, k do
  local e = 0
  if taken > 0 then
    e = windows[i]
  elseif alive then
    e = newest_at + windows[i] - now
    if e < 0 then e = 0 end
  end
  if ends then ends[i] = e end
  if e > reset then reset = e end
end

-- Retry (denials only): for a violated strategy, the weight up to the
-- running total total + cost - L_i must leave; the entry holding it (the
-- first whose total reaches it, found by bisecting) leaves at its time + W_i.
local retry = -1
if violated ~= 0 and not never then
  retry = 0
  for i = 1, k do
    if violates(violated, i) then
      local must_leave = total + cost - limits[i]
      local lo, hi = 1, size
      while lo < hi do
        local mid = lo + hi
        mid = (mid - mid % 2) / 2
        if struct_unpack('<d', log, 16 * mid + 9) >= must_leave then hi = mid else lo = mid + 1 end
      end
      local r = struct_unpack('<d', log, 16 * lo + 1) + windows[i] - now
      retries[i] = r
      if r > retry then retry = r end
    end
  end
end

if taken > 0 and not peek then
  local live = size - dead
  local join = alive and (newest_at == now or live >= max_entries)
  local entry = struct_pack('<dd', now, (alive and total or 0) + taken)
  -- The total before the first live entry, and what every total is lowered
  -- by (totals only grow: read only when the newest's is high).
  local base, lower = 0, 0
  if alive and total >= rebase_from then
    base = struct_unpack('<d', log, 16 * dead + 9)
    if base >= rebase_from then lower = base end
  end
  local lasts = log and struct_unpack('<d', log) or 0
  local stale = lasts ~= 0
  if server_clock then stale = lasts < now + widest end
  if not alive or dead > live or lower > 0 or stale then
    local last = join and size - 1 or size
    -- On a client clock, the reset plus the slack (expire_after's TTL).
    local ms, ends_at = math.floor((widest + now - read_at + 999) / 1000) + slack, 0
    if server_clock then
      ms = math.floor((2 * widest + now - read_at + 999) / 1000)
      -- Redis times the TTL from the script's start, a little before TIME.
      ends_at = read_at + (ms - 1) * 1000
    end
    local value
    if lower == 0 then
      if alive then base = struct_unpack('<d', log, 16 * dead + 9) end
      value = struct_pack('<dd', ends_at, base) .. string.sub(log or '', 16 * dead + 17, 16 * last + 16) .. entry
    else
      local records = {struct_pack('<dd', ends_at, 0)}
      for j = dead + 1, last do
        local at, through = struct_unpack('<dd', log, 16 * j + 1)
        records[#records + 1] = struct_pack('<dd', at, through - lower)
      end
      records[#records + 1] = struct_pack('<dd', now, total + taken - lower)
      value = table.concat(records)
    end
    call('SET', key, value, 'PX', string.format('%d', ms))
  else
    if join then
      call('SETRANGE', key, 16 * size, entry)
    else
      call('APPEND', key, entry)
    end
    if not server_clock then expire_after(reset) end
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
