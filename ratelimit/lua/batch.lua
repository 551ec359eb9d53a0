-- batch.lua: joined last in every script, after the `end` of the function
-- `decide(key, o)` that prelude.lua opens: the calls a script call carries.
--
-- KEYS, ARGV  prelude.lua's: one call (at most five ARGV), or a batch of m
--             calls (6m ARGV: call j's key at ARGV[6j-5], then its five).
-- Returns     for one call, its reply as the algorithm's header says; for a
--             batch, a table of the m replies in order; or the error
--             NONLOCAL, having decided nothing (see below).
-- The calls of a batch are decided one after another, so a key that appears
-- twice sees its own earlier decision, exactly as separate script calls
-- would. Only KEYS[1] is declared, so Redis routes and checks the batch by
-- it; on a cluster the script is flagged allow-cross-slot-keys (`cross_slot`
-- is set), which lets it reach keys of the node's other slots.
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
local replies = {}
for j = 1, m do replies[j] = decide(ARGV[6 * j - 5], 6 * j - 5) end
return replies
