-- clock.lua: joined after prelude.lua in every script that reads a time
-- (all but fixed_window_counter.lua, whose window Redis times by the key's
-- TTL): Redis's clock when the call sent none.
if server_clock then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
