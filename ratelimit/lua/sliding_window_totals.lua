-- sliding_window_totals.lua: the sliding window of sliding_window.lua, for
-- many sub-windows: the same answers from running totals, so a call reads
-- and writes a few fields however many sub-windows a window holds. The
-- runtime uses it when the widest window holds 16 sub-windows or more
-- (scripts.rs, TOTALS_FROM_SUB_WINDOWS).
-- Twin: src/algo/sliding_window.rs (the same as the hash layout's).
--
-- KEYS, ARGV and the reply are exactly sliding_window.lua's:
-- Loaded after prelude.lua, which sets `key`, `now` and `cost` from
-- KEYS[1], ARGV[1] and ARGV[2].
--
-- KEYS[1]  the only key touched.
-- ARGV[1]  now, integer µs since the epoch; "" = read the server clock (TIME).
-- ARGV[2]  cost, integer >= 0 (may exceed 2^53: then above every limit).
-- ARGV[3]  "1" = peek (decide, write nothing), "0" = check.
-- ARGV[4]  TTL slack in ms added to every PEXPIRE.
-- ARGV[5]  precision_us (divides every window).
-- ARGV[6]  k, the number of strategies (1..16), then k pairs
--          limit_i, window_us_i (declared order) in ARGV[7..6+2k].
-- Returns  {allowed (1|0), limit, remaining, reset_after_us,
--           retry_after_us (-1 = none), violated (bit i-1 = strategy i),
--           now (µs: the time the decision was made at)}; limit and
--           remaining are the strategy with the least room. Only when
--           k > 1, followed by k pairs remaining_i, reset_after_us_i
--           (declared order): each strategy's own state after the call.
--
-- State on Redis: a hash. As in the hash layout, sub-window index floor(t / P)
-- (a "%d" string) -> its count, and with current = floor(now / P), span_i =
-- W_i / P, strategy i counts the fields with current - span_i < index <=
-- current. Besides them: "l" = the current index of the last write, "t<i>" =
-- strategy i's count as of l, "n" = the newest index written, "p" = the
-- precision and windows the totals were made for ("P:W_1:...:W_k").
--
-- A call at current >= l, with n <= l and the same "p", starts from the
-- totals and subtracts the sub-windows that left each strategy's window
-- since l: current - l fields per strategy, none when current = l. Anything
-- else (first call, a clock that stepped back, a policy change, a state the
-- hash layout wrote, a gap wider than 64 fields) recounts every field, as
-- the hash layout does. Fields with index + widest_span <= current are
-- deleted on every write, so an older field never exists. Written only when
-- allowed, cost > 0 and not a peek, always followed by PEXPIRE
-- ceil(reset_after_us / 1000) + slack ms.

local precision = ARGV[5] + 0
local k = ARGV[6] + 0

local current = math.floor(now / precision)
local limits, spans, counts, total_fields = {}, {}, {}, {}
local signature = {ARGV[5]}
local widest = 0
for i = 1, k do
  limits[i] = ARGV[5 + 2 * i] + 0
  spans[i] = math.floor(ARGV[6 + 2 * i] / precision)
  if spans[i] > widest then widest = spans[i] end
  counts[i] = 0
  total_fields[i] = 't' .. i
  signature[i + 1] = ARGV[6 + 2 * i]
end
signature = table.concat(signature, ':')
local current_field = string.format('%d', current)

-- n, l, p, the current sub-window's count, t1..tk.
local head = redis.call('HMGET', key, 'n', 'l', 'p', current_field, unpack(total_fields))
local newest, last = tonumber(head[1]), tonumber(head[2])
local current_count = 0
local stale = {}
local entries = nil -- every live sub-window as {index, count}, when recounted

local incremental = newest and last and head[3] == signature and newest <= last and last <= current
local expiring = {}
if incremental and current > last then
  -- Fields that left strategy i's window since l: (l - span_i, current - span_i].
  local gap = current - last
  for i = 1, k do
    if gap < spans[i] then
      for idx = last - spans[i] + 1, current - spans[i] do expiring[idx] = true end
    end
  end
  local names = {}
  for idx in pairs(expiring) do names[#names + 1] = idx end
  if #names > 64 then
    incremental = false
  elseif #names > 0 then
    table.sort(names)
    local fields = {}
    for j = 1, #names do fields[j] = string.format('%d', names[j]) end
    local values = redis.call('HMGET', key, unpack(fields))
    for j = 1, #names do expiring[names[j]] = tonumber(values[j]) or 0 end
    for j = 1, #names do
      if names[j] + widest <= current and values[j] then stale[#stale + 1] = fields[j] end
    end
  end
end

if incremental then
  for i = 1, k do
    if current - last >= spans[i] then
      counts[i] = 0
    else
      local c = tonumber(head[4 + i]) or 0
      for idx = last - spans[i] + 1, current - spans[i] do c = c - expiring[idx] end
      counts[i] = c
    end
  end
  if current - last >= widest then
    -- Every field is at or before l, so every one is dead: the key starts over.
    newest = nil
    stale = false
  elseif newest + widest <= current then
    newest = nil
  end
  if current == last then current_count = tonumber(head[4]) or 0 end
else
  -- Recount every field, as the hash layout does.
  local raw = redis.call('HGETALL', key)
  newest = nil
  entries = {}
  for j = 1, #raw, 2 do
    local idx, c = tonumber(raw[j]), tonumber(raw[j + 1])
    if idx and c then
      if idx + widest <= current then
        stale[#stale + 1] = raw[j]
      else
        if newest == nil or idx > newest then newest = idx end
        if idx <= current then
          entries[#entries + 1] = {idx, c}
          if idx == current then current_count = c end
          for i = 1, k do
            if idx + spans[i] > current then counts[i] = counts[i] + c end
          end
        end
      end
    elseif string.match(raw[j], '^t%d+$') then
      -- Totals of strategies this policy no longer has.
      if tonumber(string.sub(raw[j], 2)) > k then stale[#stale + 1] = raw[j] end
    end
  end
end

local violated, never, bit = 0, false, 1
for i = 1, k do
  if cost > limits[i] then never = true end
  if counts[i] + cost > limits[i] then violated = violated + bit end
  bit = bit * 2
end
local allowed = violated == 0
local taken = allowed and cost or 0

local best_limit, best_rem = 0, nil
for i = 1, k do
  local rem = limits[i] - (counts[i] + taken)
  if rem < 0 then rem = 0 end
  if best_rem == nil or rem < best_rem then best_limit, best_rem = limits[i], rem end
end

local newest_after = newest
if taken > 0 and (newest_after == nil or newest_after < current) then newest_after = current end
local reset = 0
if newest_after ~= nil then
  reset = (newest_after + widest) * precision - now
  if reset < 0 then reset = 0 end
end
-- Per strategy (k > 1): its newest counted sub-window leaves it at
-- (newest + span_i) * P.
local quotas = {}
if k > 1 then
  for i = 1, k do
    local rem = limits[i] - (counts[i] + taken)
    if rem < 0 then rem = 0 end
    local e = 0
    if newest_after ~= nil then
      e = (newest_after + spans[i]) * precision - now
      if e < 0 then e = 0 end
    end
    quotas[2 * i - 1], quotas[2 * i] = rem, e
  end
end

-- Retry (denials only): per violated strategy, drop its sub-windows oldest
-- first until the cost fits; the latest of those times.
local retry = -1
if not allowed and not never then
  retry = 0
  bit = 1
  for i = 1, k do
    if violated % (bit * 2) >= bit then
      local left = counts[i]
      local passes_at = (current + 1) * precision
      local first = current - spans[i] + 1
      if entries then
        table.sort(entries, function(a, b) return a[1] < b[1] end)
        for j = 1, #entries do
          local e = entries[j]
          if e[1] >= first then
            left = left - e[2]
            passes_at = (e[1] + spans[i]) * precision
            if left + cost <= limits[i] then break end
          end
        end
      else
        -- Read the window's sub-windows oldest first, 128 at a time.
        local idx, done = first, false
        while not done and idx <= current do
          local stop = math.min(idx + 127, current)
          local fields = {}
          for j = idx, stop do fields[#fields + 1] = string.format('%d', j) end
          local values = redis.call('HMGET', key, unpack(fields))
          for j = 1, #fields do
            local c = tonumber(values[j])
            if c then
              left = left - c
              passes_at = (idx + j - 1 + spans[i]) * precision
              if left + cost <= limits[i] then
                done = true
                break
              end
            end
          end
          idx = stop + 1
        end
      end
      local r = passes_at - now
      if r > retry then retry = r end
    end
    bit = bit * 2
  end
end

if taken > 0 and ARGV[3] ~= '1' then
  if stale == false then
    redis.call('DEL', key)
  else
    for j = 1, #stale, 1000 do
      redis.call('HDEL', key, unpack(stale, j, math.min(j + 999, #stale)))
    end
  end
  local fields = {current_field, string.format('%d', current_count + taken), 'l', current_field, 'n', string.format('%d', newest_after), 'p', signature}
  for i = 1, k do
    fields[#fields + 1] = total_fields[i]
    fields[#fields + 1] = string.format('%d', counts[i] + taken)
  end
  redis.call('HSET', key, unpack(fields))
  local ms = math.floor((reset + 999) / 1000) + ARGV[4]
  if ms < 1 then ms = 1 end
  redis.call('PEXPIRE', key, string.format('%d', ms))
end

local reply = {allowed and 1 or 0, best_limit, best_rem or 0, reset, retry, allowed and 0 or violated, now}
for i = 1, #quotas do reply[7 + i] = quotas[i] end
return reply
