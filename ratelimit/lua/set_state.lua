-- set_state.lua: joined after policy_prelude.lua in front of the scripts whose
-- state is one string (token_bucket, leaky_bucket, gcra), so each writes it
-- the same way.
--
-- set_state(value, e, kept, reset) writes `value` to `key`, where `e` is the
-- time (µs) the new state is untouched again and `reset` = e - now:
--   with the server clock (`server_clock`), the TTL runs to the end of e's
--   whole second; `kept` says the key's TTL already runs there (a write in
--   the same second), so SET ... KEEPTTL leaves it, else SET ... PX sets it;
--   with a client clock, always PX = ceil(reset / 1000) + ARGV[4] (the slack).
-- A key so lives at most 1 s past its reset with the server clock.
local function set_state(value, e, kept, reset)
  if kept and server_clock then
    redis.call('SET', key, value, 'KEEPTTL')
    return
  end
  local ms
  if server_clock then
    ms = math.floor((e - e % 1000000 + 1000999 - now) / 1000)
  else
    ms = math.floor((reset + 999) / 1000) + ARGV[4]
  end
  if ms < 1 then ms = 1 end
  redis.call('SET', key, value, 'PX', string.format('%d', ms))
end
