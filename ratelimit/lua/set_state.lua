-- set_state.lua: joined last, after the algorithm, in the scripts whose
-- state is one string (token_bucket, leaky_bucket, gcra), so each writes its
-- state and replies the same way. Not a function: a closure made per call
-- is garbage Redis collects (issue 6).
--
-- The algorithm leaves:
--   reply  its one number: >= 0 allowed, < 0 denied (the script's header
--          says what it counts); an integer below 2^53 held in a double;
--   value  the new state (a string), or false when nothing is written;
--   e      when the written state is untouched again (µs), and
--   reset  e - now rounded up to whole µs, for a client clock's TTL;
--   kept   the key's TTL already runs to the end of e's second.
-- Writes `value` to `key`:
--   with the server clock (`server_clock`), the TTL runs to the end of e's
--   whole second; when `kept` (a write in the same second), SET ... KEEPTTL
--   leaves it, else SET ... PX sets it;
--   with a client clock, always PX = ceil(reset / 1000) + ARGV[4] (the slack).
-- A key so lives at most 1 s past its reset with the server clock.
--
-- Returns  struct.pack('<dd', reply, now): 16 bytes, two little-endian
--          doubles holding integers exactly, read by the runtime
--          (src/backend/policy_reply.rs) with the policy's constants. One
--          string costs Redis less than a table of integers (7 integers:
--          46 200 instructions per gcra call, 2: 43 400, this: 39 700, one
--          integer: 37 000), and it carries `now`, the server's time of the
--          decision (`Decision::decided_at`), which one integer cannot.
if value then
  if kept and server_clock then
    redis.call('SET', key, value, 'KEEPTTL')
  else
    local ms
    if server_clock then
      ms = math.floor((e - e % 1000000 + 1000999 - now) / 1000)
    else
      ms = math.floor((reset + 999) / 1000) + ARGV[4]
    end
    if ms < 1 then ms = 1 end
    redis.call('SET', key, value, 'PX', string.format('%d', ms))
  end
end
return struct.pack('<dd', reply, now)
