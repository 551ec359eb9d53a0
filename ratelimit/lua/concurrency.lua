-- concurrency.lua: at most `limit` permits held at once on a key, each a
-- lease. Twin: src/algo/concurrency.rs.
--
-- Policy     local limit, lease = <limit>, <lease µs>  (policy_concurrency.lua)
-- A call     decide's values (lua/README.md); `kind` 3 acquire, 4 release, 5 renew
--            the permit `permit` (its 16-byte id), `cost` its weight; any
--            other kind reports whether `cost` permits are free and holds
--            nothing.
-- Returns    the window reply (window.lua): allowed, limit, remaining,
--            reset_after_us, -1, 0, now, packed; remaining never below 0, reset_after_us until the
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

local writes = kind >= 3
local held = -(tonumber(call('ZSCORE', key, '')) or 0)
local ended = call('ZRANGEBYSCORE', key, 1, now)
for i = 1, #ended do held = held - tonumber(string.match(ended[i], '(%d+)$')) end
local changed = writes and #ended > 0
if changed then call('ZREMRANGEBYSCORE', key, 1, now) end

local member = (permit or '') .. ':' .. string.format('%d', cost)
local fits = cost <= limit and held <= limit - cost
local allowed = true
if kind == 3 then
  allowed = fits
  if fits and cost > 0 then
    call('ZADD', key, now + lease, member)
    held = held + cost
    changed = true
  end
elseif kind == 4 then
  if call('ZREM', key, member) == 1 then
    held = held - cost
    changed = true
  end
elseif kind == 5 then
  allowed = call('ZSCORE', key, member) ~= false
  if allowed then
    call('ZADD', key, now + lease, member)
    changed = true
  end
else
  allowed = fits
  -- Reported as if taken: remaining after the call it answers for.
  if fits then held = held + cost end
end

local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
local reset = 0
if last[2] and tonumber(last[2]) > now then reset = last[2] - now end
if changed then
  if held <= 0 then
    call('DEL', key)
  else
    call('ZADD', key, -held, '')
    local ms = math.floor((reset + now - read_at + 999) / 1000) + slack
    if ms < 1 then ms = 1 end
    call('PEXPIRE', key, string.format('%d', ms))
  end
end
local remaining = limit - held
if remaining < 0 then remaining = 0 end
return struct_pack('<ddddddd', allowed and 1 or 0, limit, remaining, reset, -1, 0, now)
