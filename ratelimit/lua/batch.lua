-- batch.lua: joined last in every script, after the `end` of the function
-- `decide(key, o)` that prelude.lua opens: the calls a script call carries.
--
-- KEYS, ARGV  prelude.lua's: one call (one key, at most five ARGV), or a
--             batch of m calls in one of two forms:
--               every key declared, where the server takes that (one
--               server, Sentinel): call j's key is KEYS[j], its five
--               values ARGV[5j-4..5j];
--               only KEYS[1] declared (a cluster node takes declared keys
--               of one slot only): call j's key at ARGV[6j-5], then its
--               five values.
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

-- One call of a batch, on its own: its failure is its reply, not the batch's.
-- A call fails at its first read, before it writes, so a failed call took nothing.
local function protected(key, o)
  local ok, reply = pcall(decide, key, o)
  if ok then return reply end
  if type(reply) == 'table' and reply.err then return {reply.err} end
  return {tostring(reply)}
end

local replies = {}
if #KEYS > 1 then
  for j = 1, #KEYS do replies[j] = protected(KEYS[j], 5 * j - 5) end
  return replies
end
if #ARGV <= 5 then return decide(KEYS[1], 0) end
local m = #ARGV / 6
-- The runtime groups a cluster batch by the slots it last learnt; if they
-- moved, a key may now be on another node, and touching it would fail the
-- script after the calls before it had written. So every key is tried
-- first, and a batch with a key of another node is refused whole.
if cross_slot then
  for j = 2, m do
    local found = redis.pcall('EXISTS', ARGV[6 * j - 5])
    if type(found) == 'table' and found.err then
      return redis.error_reply('NONLOCAL a key of this batch is not served by this node')
    end
  end
end
for j = 1, m do replies[j] = protected(ARGV[6 * j - 5], 6 * j - 5) end
return replies
