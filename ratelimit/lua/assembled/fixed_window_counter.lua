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
-- policy_counter.lua: the counter reader. Sets `limit`, and the window in
-- ms as `window`, from `policy` (lua/README.md).
local limit, window = struct_unpack('<dd', policy)
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
-- fixed_window_counter.lua: a fixed window of one strategy kept as a
-- counter whose TTL is the window, started by the first admitted hit (INCR
-- or INCRBY, and SET ... PX when it created the key), so the decision needs no
-- clock: Redis times the window by its own. Used on Redis's clock for a
-- policy of one strategy whose state fits a double (a limit below 2^20, a
-- window below 2^32 ms: ratelimit/src/backend/redis/counter.rs);
-- fixed_window.lua decides every
-- other fixed window. Joined after prelude.lua but not clock.lua: it takes
-- no `now` (the runtime never sends one to it), and reads TIME only to
-- date its reply, to judge a refund and to read fixed_window.lua's hash.
--
-- Policy     local limit, window = <L>, <W ms>  (policy_counter.lua)
-- Values     decide's (lua/README.md, "A call's values"): cost and kind;
--            never now, and no slack.
-- Returns    the counter reply: two numbers `v, now`, which batch.lua packs
--            as the bucket reply is (16 bytes; a batch's joined into one
--            string: a table reply costs Redis more to hand back), now =
--            Redis's TIME in µs, the time of the decision, and
--            v = count * (W + 2) + t, where
--              count  permits taken in the window after the call (as if
--                     taken for a peek; for a denial, as it stands, and for
--                     a refund, after it: at most L, so a count left by an
--                     earlier, larger limit fits);
--              t      0 when no window runs, else PTTL + 1 (a counter of
--                     another window: as this W from its start, see State),
--                     at most W + 1: the ms, rounded
--                     up, until the window has surely ended (Redis drops a
--                     key once its ms clock passes the expiry, so the window
--                     lasts W to W + 1 ms from the first hit, never less);
--            and a denial replies -1 - v. The caller knows L and W, so v
--            is the whole decision.
--
-- State (a string holding an integer): W * 2^21 + count, the window it
-- was written under above the count (count < 2^21 and W < 2^32 ms: exact
-- in a double, counter.rs), so a policy of another window finds the
-- window's start: its end (the TTL) less that W. Its TTL is the window.
-- A denied call takes nothing: its increment is undone with DECRBY in the
-- same script (on a counter of a shorter window, the count is rewritten as
-- this window's, which it runs on by: SET ... PX). Peeks, cost 0 and a cost above L (never admitted) only read.
-- A charge adds its cost to the running window's count (starting one if
-- none runs) whatever the room, at most to one unit of window less one,
-- and replies as a check of cost 0 after it.
-- A refund lowers the count of a running window by cost, never below zero
-- (SET ... KEEPTTL), and replies as a check of cost 0: a window refunded
-- to zero still runs to its end, as fixed_window.lua's does, so a key
-- holding 0 is a running window, and none is an ended one. It gives back
-- only while the refunded call's window runs: Redis's time is more than
-- `margin` µs before that window's end (`permit` holds it after its
-- start, lua/README.md), so the count lowered is never a later window's.
-- A counter written under another window W' is judged by this policy's W
-- from its start, as the memory store does: it runs until that start + W
-- (the TTL + W - W'), and a write makes it this policy's counter (its
-- count with W, the TTL cut or stretched to that end).
--
-- The key may instead hold fixed_window.lua's hash (the same key: another
-- policy of this name had several strategies, or a client clock): its
-- first strategy ("s1", "c1") is this window, read by that script's rule,
-- and a check that takes permits turns it into this counter, carrying the
-- count and the window's end (the memory store keeps one state for both,
-- so a policy gaining or losing strategies keeps counting either way). A
-- hash holding windows beyond the first ("s2" on) stays a hash: they count
-- every admitted call while they run, by that script's rule (on_kept).

-- The value's unit of window (see State); fixed_window.lua reads it alike.
local per_ms = 2097152
local tag = window * per_ms
-- A charge adds at most 2^52 at once (algo::charged).
if charge and cost > 4503599627370496 then cost = 4503599627370496 end

-- The common call first, before the helpers below are made (each a
-- closure per call): a check that takes permits from this window's running
-- counter needs only INCR, PTTL and TIME for its reply.
local got, ttl = false, 0
if not (peek or refund or charge or cost == 0 or cost > limit) then
  if cost == 1 then got = try('INCR', key) else got = try('INCRBY', key, string.format('%d', cost)) end
  if type(got) == 'number' then
    if got >= tag and got < tag + per_ms then
      ttl = call('PTTL', key) + 1
      if ttl >= 1 and ttl <= window + 1 then
        got = got - tag
        if got > limit then
          call('DECRBY', key, string.format('%d', cost))
          return -1 - (math.min(got - cost, limit) * (window + 2) + ttl), time_read or redis_time()
        end
        return got * (window + 2) + ttl, time_read or redis_time()
      end
    elseif got < cost or got - cost >= per_ms then
      -- A value below one unit of window (a key INCR made) reads alike
      -- whatever its TTL (as_ours), so only the others read it.
      ttl = call('PTTL', key) + 1
    end
  end
end

-- A counter's value `v` and `t` (its PTTL + 1) as this policy's window:
-- the count, t (0 when no window runs under this policy: then no count),
-- and the window it was written under. No TTL (never written so) reads as
-- a window starting now.
local function as_ours(v, t)
  local written = math.floor(v / per_ms)
  local count = v - written * per_ms
  if t < 1 then return count, window + 1, written end
  t = t + window - written
  if t < 1 then return 0, 0, written end
  if t > window + 1 then t = window + 1 end
  return count, t, written
end

-- The reply: v, dated by Redis's clock (head.lua).
local function dated(v)
  return v, time_read or redis_time()
end

-- A refunded call's window end was worked out as its reply's time + PTTL,
-- by a script whose key expiry runs on a time read earlier, in whole ms;
-- Redis keeps the key through the ms of its expiry, so that end is at most
-- the script's own run after the key's, which this covers.
local margin = 2000

-- A count after a charge of `cost`, whatever the room: it stays below one
-- unit of window (the value's form), which is past any count a decision
-- tells apart (the limit is below half of it, and no refund gives back
-- more than the limit).
local function charged(count)
  local c = count + cost
  if c > per_ms - 1 then c = per_ms - 1 end
  return c
end

-- A denied check on the hash by a window longer than its first one's own
-- length (w1) while it runs from `s`: it runs on by this one, so the key is
-- kept to its end unless a window it holds ends `later` (fixed_window.lua's
-- rule).
local function grow(s, w1, later)
  if peek or refund or charge or cost == 0 or cost > limit or not s or (w1 or 0) >= window * 1000 then return end
  call('HSET', key, 'w1', string.format('%d', window * 1000))
  if not later then
    local ms = math.ceil((s + window * 1000 - (time_read or redis_time())) / 1000)
    if ms < 1 then ms = 1 end
    call('PEXPIRE', key, string.format('%d', ms))
  end
end

-- Decides the call on fixed_window.lua's hash holding windows beyond the
-- first (an earlier policy had more strategies), as that script would for
-- one strategy: the key stays a hash, and each of those windows counts an
-- admitted call while it runs by its own length, never judging it.
local function on_kept()
  local all, f = call('HGETALL', key), {}
  for i = 1, #all, 2 do f[all[i]] = tonumber(all[i + 1]) end
  -- `now` (never sent to this script) becomes the time judged at, as in
  -- fixed_window.lua: Redis's, moved up to the latest start.
  now = time_read or redis_time()
  local last, w = 1, window * 1000
  while f['s' .. (last + 1)] do last = last + 1 end
  for j = 1, last do
    if f['s' .. j] and f['s' .. j] > now then now = f['s' .. j] end
  end
  local s, count = f.s1, f.c1
  if not (s and count and now - s < w) then s, count = false, 0 end
  local runs = {}
  for j = 2, last do runs[j] = now - f['s' .. j] < (f['w' .. j] or 0) end
  if refund then
    local taken, args = struct_unpack('<d', permit), {}
    local function lower(j, start, length, c)
      if start and start <= taken and taken - start < length and cost > 0 and c > 0 then
        if cost >= c then c = 0 else c = c - cost end
        args[#args + 1], args[#args + 2] = 'c' .. j, string.format('%d', c)
      end
      return c
    end
    count = lower(1, s, w, count)
    for j = 2, last do
      if runs[j] then lower(j, f['s' .. j], f['w' .. j], f['c' .. j] or 0) end
    end
    if #args > 0 then call('HSET', key, unpack(args)) end
    cost = 0
  end
  local t = 0
  if s then t = math.ceil((s + w - now) / 1000) + 1 end
  if count + cost > limit and not charge then
    local later = false
    for j = 2, last do
      if runs[j] and s and f['s' .. j] + f['w' .. j] > s + w then later = true end
    end
    grow(s, f.w1, later)
    return dated(-1 - (math.min(count, limit) * (window + 2) + t))
  end
  if cost > 0 and t == 0 then s, t = now, window + 1 end
  if cost > 0 and not peek then
    local args = {'s1', string.format('%d', s), 'c1', string.format('%d', count + cost), 'w1', string.format('%d', w)}
    local until_us = s + w - now
    for j = 2, last do
      if runs[j] and f['s' .. j] + f['w' .. j] - now > until_us then until_us = f['s' .. j] + f['w' .. j] - now end
    end
    -- The windows up to the last that runs, each counting the call.
    local keep = 1
    for j = 2, last do
      if runs[j] then keep = j end
    end
    for j = 2, keep do
      local c = f['c' .. j] or 0
      if runs[j] then c = c + cost end
      local n = #args
      args[n + 1], args[n + 2] = 's' .. j, string.format('%d', f['s' .. j])
      args[n + 3], args[n + 4] = 'c' .. j, string.format('%d', c)
      args[n + 5], args[n + 6] = 'w' .. j, string.format('%d', f['w' .. j] or 0)
    end
    call('DEL', key)
    call('HSET', key, unpack(args))
    local ms = math.ceil((now + until_us - (time_read or redis_time())) / 1000) + 1
    call('PEXPIRE', key, string.format('%d', ms))
  end
  -- A charge replies as a check of cost 0 after it.
  if charge and count + cost > limit then return dated(-1 - (limit * (window + 2) + t)) end
  return dated((count + cost) * (window + 2) + t)
end

-- Decides the call on fixed_window.lua's hash at the key, as that script
-- would for its first strategy.
local function on_hash()
  local h = call('HMGET', key, 's1', 'c1', 's2', 'w1')
  if h[3] then return on_kept() end
  now = time_read or redis_time()
  local s, count, t = tonumber(h[1]), tonumber(h[2]), 0
  if s and count then
    if now < s then now = s end
    local left = s + window * 1000 - now
    -- t as PTTL + 1 would be: the ms, rounded up, until it surely ended.
    if left > 0 then t = math.ceil(left / 1000) + 1 else count = 0 end
  else
    count = 0
  end
  if refund then
    local taken = struct_unpack('<d', permit)
    if t > 0 and s <= taken and taken - s < window * 1000 and cost > 0 and count > 0 then
      if cost >= count then count = 0 else count = count - cost end
      call('HSET', key, 'c1', string.format('%d', count))
    end
    cost = 0
  end
  if charge then
    if cost > 0 then
      if t == 0 then t = window + 1 end
      count = charged(count)
      call('DEL', key)
      call('SET', key, string.format('%d', tag + count), 'PX', string.format('%d', t - 1))
    end
    cost = 0
  end
  if count + cost > limit then
    if t > 0 then grow(s, tonumber(h[4]), false) end
    return dated(-1 - (math.min(count, limit) * (window + 2) + t))
  end
  if cost > 0 and not peek then
    if t == 0 then t = window + 1 end
    count = count + cost
    call('DEL', key)
    call('SET', key, string.format('%d', tag + count), 'PX', string.format('%d', t - 1))
    return dated(count * (window + 2) + t)
  end
  if cost > 0 and t == 0 then t = window + 1 end
  return dated((count + cost) * (window + 2) + t)
end

if peek or refund or charge or cost == 0 or cost > limit then
  local held = try('GET', key)
  if type(held) == 'table' then return on_hash() end
  local count, t, written = 0, 0, 0
  if held then count, t, written = as_ours(tonumber(held), call('PTTL', key) + 1) end
  if refund then
    local _, window_end = struct_unpack('<dd', permit)
    local running = t > 0 and (time_read or redis_time()) + margin < window_end
    if running and cost > 0 and count > 0 then
      if cost >= count then count = 0 else count = count - cost end
      call('SET', key, string.format('%d', written * per_ms + count), 'KEEPTTL')
    end
    cost = 0
  end
  if charge then
    -- Written as this policy's counter, a window starting if none runs.
    if cost > 0 then
      if t == 0 then t = window + 1 end
      count = charged(count)
      local px = t - 1
      if px < 1 then px = 1 end
      call('SET', key, string.format('%d', tag + count), 'PX', string.format('%d', px))
    end
    cost = 0
  end
  if count + cost > limit then return dated(-1 - (math.min(count, limit) * (window + 2) + t)) end
  if cost > 0 and t == 0 then t = window + 1 end
  return dated((count + cost) * (window + 2) + t)
end
-- INCR fails on a hash, having written nothing; any other failure (a
-- replica's READONLY, out of memory) is the call's own, raised as is.
if type(got) == 'table' then
  if not string.find(got.err or '', 'WRONGTYPE', 1, true) then error(got) end
  return on_hash()
end
-- A key INCR made (no TTL, no window yet), or a counter of another window
-- (or of this one without its TTL): judged from its start by this window,
-- and on a pass written as this window's counter (a window starts if none
-- runs under it).
local before, t, written = as_ours(got - cost, ttl)
if t == 0 then before, t = 0, window + 1 end
if before + cost > limit then
  if written < window then
    -- Denied by a longer window than its own: it runs on by this one.
    local px = t - 1
    if px < 1 then px = 1 end
    call('SET', key, string.format('%d', tag + before), 'PX', string.format('%d', px))
  else
    call('DECRBY', key, string.format('%d', cost))
  end
  return dated(-1 - (math.min(before, limit) * (window + 2) + t))
end
local px = t - 1
if px < 1 then px = 1 end
call('SET', key, string.format('%d', tag + before + cost), 'PX', string.format('%d', px))
return dated((before + cost) * (window + 2) + t)
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
