-- set_state.lua: joined last in the scripts whose state is one string
-- (token_bucket, leaky_bucket, gcra), so each writes its state and replies
-- the same way.
--
-- The algorithm leaves:
--   reply  its one number: >= 0 allowed, < 0 denied (the script's header
--          says what it counts); an integer below 2^53 held in a double;
--   value  the new state (a string), or false when nothing is written;
--   e      when the written state is untouched again (µs), and
--   reset  e - now rounded up to whole µs;
--   kept   the key's TTL already runs to the end of e's second, and the
--          key holds a state as long as `value`.
-- Writes `value` to `key`, its TTL counted from `read_at` (clock.lua):
--   with the server clock, the TTL runs to the end of e's whole second;
--   when `kept` (a write in the same second), SETRANGE key 0 value
--   overwrites the whole state and leaves the TTL (its integer reply costs
--   Lua less than the table SET's OK becomes), else SET ... PX sets it.
--   Redis expires keys by the clock TIME reads, so a kept TTL still covers
--   e, and a key lives at most 1 s past its reset;
--   with a client clock, always PX = ceil((e - read_at) / 1000) + slack.
--
-- Returns  the bucket reply as two numbers, `reply, now`, which batch.lua
--          packs as struct.pack('<dd', reply, now), 16 bytes, two
--          little-endian doubles holding integers exactly (a batch's all in
--          one pack, joined in order). The runtime
--          rebuilds every field of the decision from `reply`, the cost and
--          the policy's numbers (ratelimit/src/backend/redis/reply.rs, by
--          the twins' formulas); `now` is the time the call was judged at
--          (Redis's, on its own clock).
if value then
  if kept and server_clock then
    call('SETRANGE', key, '0', value)
  else
    local ms
    if server_clock then
      ms = math.floor((e - e % 1000000 + 1000999 - read_at) / 1000)
    else
      ms = math.floor((e - read_at + 999) / 1000) + slack
    end
    if ms < 1 then ms = 1 end
    call('SET', key, value, 'PX', string.format('%d', ms))
  end
end
return reply, now
