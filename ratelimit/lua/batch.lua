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
