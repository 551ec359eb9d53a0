-- batch.lua: joined last in every script, after the `end` of the function
-- `decide(key, o)` that prelude.lua opens: the calls a script call carries.
--
-- KEYS, ARGV  prelude.lua's: m keys, call j on KEYS[j] with ARGV[4j-3..4j].
-- Returns     for one key, that call's reply as the algorithm's header
--             says; for m > 1, a table of the m replies in KEYS' order.
-- The calls are decided one after another, so a key that appears twice
-- sees its own earlier decision, exactly as separate script calls would.
if #KEYS == 1 then return decide(KEYS[1], 0) end
local replies = {}
for j = 1, #KEYS do replies[j] = decide(KEYS[j], 4 * j - 4) end
return replies
