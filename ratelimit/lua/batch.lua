-- batch.lua: joined last in every script, after the `end` of the function
-- `decide(key, policy, cost, kind, now, slack, permit)` that prelude.lua opens: the
-- calls a script call carries, and their values (prelude.lua says what
-- each means).
--
-- KEYS, ARGV  one call: its key KEYS[1] and at most five ARGV, as text, a
--             later one needing the earlier ones (the runtime leaves out
--             the trailing ones that are the common call's):
--               [1] policy; [2] cost (absent = 1); [3] kind, its digit
--               (absent = 0, a check), then a permit's 16-byte id for a
--               concurrency call; [4] now (absent or empty = Redis's
--               clock); [5] slack (sent with [4]; absent = 0);
--             or a batch of m calls, two values each: the policy, then the
--             call: empty for the common call (cost 1, a check, Redis's
--             clock), else struct.pack('<dddd', cost, kind, now, slack)
--             with now = -1 for Redis's clock, then a permit's 16-byte id
--             for a concurrency call. In one of two forms:
--               every key declared, where the server takes that (one
--               server, Sentinel): call j's key is KEYS[j], its values
--               ARGV[2j-1], ARGV[2j];
--               only KEYS[1] declared (a cluster node takes declared keys
--               of one slot only): call j's key at ARGV[3j-2], then its
--               two values.
-- Returns     for one call, its reply as the algorithm's header says; for a
--             batch, a table of the m replies in order, in the place of a
--             call that failed (its key holds another type of value) a
--             table of one string, its error (no reply of an algorithm has
--             that shape; an error element would fail the whole batch in
--             clients); or the error NONLOCAL, having decided nothing (see
--             below).
-- The calls of a batch are decided one after another, so a key that appears
-- twice sees its own earlier decision, exactly as separate script calls
-- would. On a cluster the script is flagged allow-cross-slot-keys
-- (`cross_slot` is set), which lets it reach keys of the node's other slots.

-- One call's values from its text ARGV.
local function single()
  local cost, kind, slack, permit = 1, 0, 0, nil
  if ARGV[2] then cost = ARGV[2] + 0 end
  if ARGV[3] then
    kind = string.byte(ARGV[3]) - 48
    if #ARGV[3] > 1 then permit = string.sub(ARGV[3], 2) end
  end
  if ARGV[5] then slack = ARGV[5] + 0 end
  return KEYS[1], ARGV[1], cost, kind, tonumber(ARGV[4]), slack, permit
end

-- One call of a batch, on its own: its failure is its reply, not the batch's.
-- A call fails at its first read, before it writes, so a failed call took nothing.
-- The common call's word is empty, so it needs no unpacking.
local function protected(key, policy, word)
  local ok, reply
  if word == '' then
    ok, reply = pcall(decide, key, policy, 1, 0, nil, 0)
  else
    local cost, kind, now, slack = struct_unpack('<dddd', word)
    if now < 0 then now = nil end
    local permit = nil
    if #word > 32 then permit = string.sub(word, 33) end
    ok, reply = pcall(decide, key, policy, cost, kind, now, slack, permit)
  end
  if ok then return reply end
  if type(reply) == 'table' and reply.err then return {reply.err} end
  return {tostring(reply)}
end

local replies = {}
if #KEYS > 1 then
  for j = 1, #KEYS do replies[j] = protected(KEYS[j], ARGV[2 * j - 1], ARGV[2 * j]) end
  return replies
end
if #ARGV <= 5 then return decide(single()) end
local m = #ARGV / 3
-- The runtime groups a cluster batch by the slots it last learnt; if they
-- moved, a key may now be on another node, and touching it would fail the
-- script after the calls before it had written. So every key is tried
-- first, and a batch with a key of another node is refused whole.
if cross_slot then
  for j = 2, m do
    local found = redis.pcall('EXISTS', ARGV[3 * j - 2])
    if type(found) == 'table' and found.err then
      return redis.error_reply('NONLOCAL a key of this batch is not served by this node')
    end
  end
end
for j = 1, m do replies[j] = protected(ARGV[3 * j - 2], ARGV[3 * j - 1], ARGV[3 * j]) end
return replies
