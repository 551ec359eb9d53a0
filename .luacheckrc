-- luacheck reads the scripts as Redis runs them: ratelimit/lua/assembled/,
-- each made of the fragments in ratelimit/lua/ (a fragment alone reads
-- values another defines). Run from the repository's root:
--   luacheck ratelimit/lua/assembled

-- Redis runs Lua 5.1 with its own libraries and refuses new globals; it
-- loads no io or package library and removes loadfile and dofile (Redis 7
-- keeps os.clock alone, which no script needs).
std = "lua51"
read_globals = {"redis", "KEYS", "ARGV", "cjson", "struct", "bit", "cmsgpack"}
not_globals = {"io", "os", "require", "module", "package", "loadfile", "dofile"}
allow_defined_top = false

-- Every family's `decide` takes the same values, and prelude.lua and the
-- policy readers name them for all; a family that is never sent one, or
-- whose policy has no use for one of its numbers, leaves it unread.
local never_sent = {
  -- No refund nor charge reaches a sliding window or log (the runtime
  -- refuses them). Only a fixed window has calendar strategies, whose
  -- starts are `opens`. The sliding window sets its TTL in its one SET,
  -- so window.lua's `expire_after` goes unused there.
  sliding_window = {"211/refund", "211/charge", "212/permit", "211/expire_after"},
  sliding_log = {"211/refund", "211/charge", "212/permit", "211/precision", "241/opens"},
  -- A fixed window's precision is 0: its windows have no sub-windows.
  fixed_window = {"211/precision"},
  -- The counter runs on Redis's clock only: no client time, no slack.
  fixed_window_counter = {"211/server_clock", "212/slack"},
  -- A concurrency call's kind is its own (acquire, release, renew);
  -- a peek reports like a check, and there are no refunds nor charges.
  concurrency = {"211/peek", "211/refund", "211/charge"},
}
for family, ignored in pairs(never_sent) do
  files["ratelimit/lua/assembled/" .. family .. ".lua"] = {ignore = ignored}
  files["ratelimit/lua/assembled/" .. family .. ".cross_slot.lua"] = {ignore = ignored}
end
