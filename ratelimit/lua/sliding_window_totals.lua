-- sliding_window_totals.lua: the sliding window of sliding_window.lua for
-- windows of many sub-windows: the same answers from running totals, so a
-- call reads and writes a few fields however many sub-windows a window
-- holds. Twin: src/algo/sliding_window.rs (the same as the hash layout's).
--
-- Policy     local precision, limits, windows = <P µs>, {<L_1>, ...}, {<W_1 µs>, ...}
-- Values     decide's (lua/README.md, "A call's values").
-- Returns    the window reply (window.lua).
--
-- State (a hash): sub_windows.lua's fields, and besides them "l" = the
-- current index of the last write, "t<i>" = strategy i's count as of l,
-- "n" = the newest index written, "p" = the precision and windows the
-- totals were made for ("P:W_1:...:W_k"), which the fields were counted at.
--
-- The call first catches up with n (sub_windows.lua), so current >= l.
-- With n <= l and the same "p", it starts from the totals and subtracts
-- the sub-windows that left each strategy's window since l: current - l
-- fields per strategy, none when current = l. Anything else (first call, a
-- policy change, a state the hash layout wrote, a gap wider than 64
-- fields) recounts every field, as the hash layout does (another precision
-- moves them first: sub_windows.lua). Written only when allowed, cost > 0
-- and not a peek, always followed by PEXPIRE to the reset; the whole key
-- afresh when the fields were counted at another precision.

local signature = {string.format('%d', precision)}
local total_fields = {}
for i = 1, k do
  total_fields[i] = 't' .. i
  signature[i + 1] = string.format('%d', windows[i])
end
signature = table.concat(signature, ':')
local current_field = string.format('%d', current)

-- n, l, p, the current sub-window's count, t1..tk.
local head = call('HMGET', key, 'n', 'l', 'p', current_field, unpack(total_fields))
local newest, last = tonumber(head[1]), tonumber(head[2])
if newest then newest = moved(newest, counted_at(head[3])) end
if newest and newest > current then
  catch_up(newest)
  current_field = string.format('%d', current)
  head[4] = call('HGET', key, current_field)
end
local counts, current_count, stale, converted = {}, 0, {}, false
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
    local values = call('HMGET', key, unpack(fields))
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
  -- Recount every field, as the hash layout does; drop the totals of
  -- strategies this policy no longer has.
  counts, newest, entries, current_count, stale, converted = recount(call('HGETALL', key), function(field)
    return string.match(field, '^t%d+$') and tonumber(string.sub(field, 2)) > k
  end)
  current_field = string.format('%d', current)
end

local violated, never = judge(counts)
local taken = violated == 0 and cost or 0

local newest_after = newest
if taken > 0 and (newest_after == nil or newest_after < current) then newest_after = current end
local reset, ends = resets(newest_after)

local retry = -1
if violated ~= 0 and not never then
  retry = 0
  for i = 1, k do
    if violates(violated, i) then
      local r
      if entries then
        r = retry_from_entries(entries, counts, i)
      else
        -- Read the window's sub-windows oldest first, 128 at a time.
        local left, passes_at = counts[i], (current + 1) * precision
        local idx, done = current - spans[i] + 1, false
        while not done and idx <= current do
          local stop = math.min(idx + 127, current)
          local fields = {}
          for j = idx, stop do fields[#fields + 1] = string.format('%d', j) end
          local values = call('HMGET', key, unpack(fields))
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
        r = passes_at - now
      end
      retries[i] = r
      if r > retry then retry = r end
    end
  end
end

if taken > 0 and not peek then
  local fields = {'l', current_field, 'n', string.format('%d', newest_after), 'p', signature}
  for i = 1, k do
    fields[#fields + 1] = total_fields[i]
    fields[#fields + 1] = string.format('%d', counts[i] + taken)
  end
  if converted then
    rewrite(entries, taken, fields)
  else
    if stale == false then
      call('DEL', key)
    else
      delete_fields(stale)
    end
    fields[#fields + 1] = current_field
    fields[#fields + 1] = string.format('%d', current_count + taken)
    call('HSET', key, unpack(fields))
  end
  expire_after(reset)
end

return window_reply(violated, counts, taken, reset, retry, ends)
