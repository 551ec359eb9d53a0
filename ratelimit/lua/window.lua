-- window.lua: joined after clock.lua in the three window scripts
-- (fixed_window, sliding_window, sliding_log): what
-- they decide alike from their per-strategy counts.
--
-- The policy (policy_windows.lua) sets `limits` and `windows` (µs), one entry
-- per strategy in declared order.
--
-- Every window script returns the window reply, built by `window_reply`,
-- its numbers packed as little-endian doubles (a table reply costs Redis
-- more to hand back than a string):
--   allowed (1|0), limit, remaining, reset_after_us,
--   retry_after_us (-1 = none), violated (bit i-1 = strategy i),
--   now (µs: the time the call was judged at, see clock.lua)
-- where limit and remaining are the strategy with the least room; only
-- when there are several strategies, followed by one triple per strategy
-- (declared order): remaining_i, reset_after_us_i after the call, and
-- retry_after_us_i, when that strategy alone would let the call pass
-- (-1 = not violated, or no wait helps).
local k = #limits

-- Each violated strategy's own retry time, set by the script while it
-- finds the call's (the latest of them); read only when k > 1.
local retries = {}

-- Which strategies a call of `cost` violates, from each one's count before
-- the call: the bits of `violated`, and whether some limit is below the
-- cost (then no wait would help: no retry time).
local function judge(counts)
  local violated, never, bit = 0, false, 1
  for i = 1, k do
    if cost > limits[i] then never = true end
    if counts[i] + cost > limits[i] then violated = violated + bit end
    bit = bit * 2
  end
  return violated, never
end

-- Whether strategy i's bit is set in `violated`.
local function violates(violated, i)
  local bit = 2 ^ (i - 1)
  return violated % (bit * 2) >= bit
end

-- The reply: `counts` before the call, `taken` what the call took (0 when
-- denied), `ends` each strategy's reset after the call (read only when
-- there are several). Its head is packed by a literal format and the
-- triples appended: no table, no format made per call.
local function window_reply(violated, counts, taken, reset, retry, ends)
  local best_limit, best_rem, triples = 0, nil, ''
  for i = 1, k do
    local rem = limits[i] - (counts[i] + taken)
    if rem < 0 then rem = 0 end
    if best_rem == nil or rem < best_rem then best_limit, best_rem = limits[i], rem end
    if k > 1 then triples = triples .. struct_pack('<ddd', rem, ends[i], retries[i] or -1) end
  end
  return struct_pack('<ddddddd', violated == 0 and 1 or 0, best_limit, best_rem, reset, retry, violated, now) .. triples
end

-- Sets the key's TTL to outlive a reset `us` after `now` (the slack
-- added), counted from `read_at`: Redis expires keys by the time it reads.
local function expire_after(us)
  local ms = math.floor((us + now - read_at + 999) / 1000) + slack
  if ms < 1 then ms = 1 end
  call('PEXPIRE', key, string.format('%d', ms))
end
