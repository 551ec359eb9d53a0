-- concurrency.lua: at most `limit` permits held at once on a key, each a
-- lease. Twin: src/algo/concurrency.rs.
--
-- Policy     local limit, lease = <limit>, <lease µs>  (policy_concurrency.lua)
-- KEYS, ARGV prelude.lua's, but [3] is the call's kind and, for a permit's
--            calls, the permit: 'a' acquire, 'r' release, 'n' renew, each
--            followed by the permit's 16-byte id; anything else is a check
--            or peek, which reports whether `cost` permits are free and
--            holds nothing. [2] is the permit's weight.
-- Returns    the window reply: {allowed, limit, remaining, reset_after_us,
--            -1, 0, now}, remaining never below 0, reset_after_us until the
--            last lease ends:
--              acquire  allowed when `cost` more fit; remaining after it;
--              release  allowed; the state after it (a permit not held
--                       gives nothing back, so releasing twice is once);
--              renew    allowed when the permit is still held, its lease
--                       then running again from now; 0 when its lease has
--                       ended: an ended lease is never taken again.
--
-- State (a sorted set): each permit held, member = id .. ':' .. weight,
-- score = the µs its lease ends (> 0); and the member '' whose score is
-- minus the permits held, so no count scans the set. A lease holds nothing
-- from its score on; a permit's call first drops the ended ones. The key
-- lives until the last lease ends (+ slack with a client clock).

local kind = ARGV[o + 3] or ''
local flag = string.sub(kind, 1, 1)
local writes = flag == 'a' or flag == 'r' or flag == 'n'
local held = -(tonumber(redis.call('ZSCORE', key, '')) or 0)
local ended = redis.call('ZRANGEBYSCORE', key, 1, now)
for i = 1, #ended do held = held - tonumber(string.match(ended[i], '(%d+)$')) end
local changed = writes and #ended > 0
if changed then redis.call('ZREMRANGEBYSCORE', key, 1, now) end

local member = string.sub(kind, 2) .. ':' .. (ARGV[o + 2] or '1')
local fits = cost <= limit and held <= limit - cost
local allowed = true
if flag == 'a' then
  allowed = fits
  if fits and cost > 0 then
    redis.call('ZADD', key, now + lease, member)
    held = held + cost
    changed = true
  end
elseif flag == 'r' then
  if redis.call('ZREM', key, member) == 1 then
    held = held - cost
    changed = true
  end
elseif flag == 'n' then
  allowed = redis.call('ZSCORE', key, member) ~= false
  if allowed then
    redis.call('ZADD', key, now + lease, member)
    changed = true
  end
else
  allowed = fits
  -- Reported as if taken: remaining after the call it answers for.
  if fits then held = held + cost end
end

local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local reset = 0
if last[2] and tonumber(last[2]) > now then reset = last[2] - now end
if changed then
  if held <= 0 then
    redis.call('DEL', key)
  else
    redis.call('ZADD', key, -held, '')
    local ms = math.floor((reset + now - read_at + 999) / 1000) + slack
    if ms < 1 then ms = 1 end
    redis.call('PEXPIRE', key, string.format('%d', ms))
  end
end
local remaining = limit - held
if remaining < 0 then remaining = 0 end
return {allowed and 1 or 0, limit, remaining, reset, -1, 0, now}
