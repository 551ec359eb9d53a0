-- sliding_log.lua: an exact log of admitted calls, one entry per call (not
-- per permit), so a call's work never depends on its cost: one GET, at most
-- one write, and bisections of the log in Lua, O(log n) entries read of n
-- held. An entry at s counts for window W while now - s < W (half-open).
-- Twin: src/algo/sliding_log.rs.
--
-- Policy     local limits, windows = {<L_1>, ...}, {<W_1 µs>, ...}  (policy_windows.lua)
-- Values     decide's (lua/README.md, "A call's values").
-- Returns    the window reply (window.lua).
--
-- State (a string of 16-byte records, each struct.pack('<dd', ...)): the
-- head (lasts, base), then one entry (at, through) per admitted call in
-- time order: the µs it was admitted at, and the running total of permits
-- through it since the log started; base is the total before the first
-- entry, so an entry's weight is its total less the record's before it.
-- Times strictly increase, and so do totals: a call is judged at the
-- newest entry's time if now is earlier (clock.lua), and a call admitted
-- at the newest entry's very µs joins that entry. Strategy i counts
-- total - the total before the oldest entry with s > now - W_i (found by
-- bisecting), total being the newest's. Written only when allowed, cost > 0
-- and not a peek: the entry APPENDed (or SETRANGE over the newest it
-- joins), one command, or the key written afresh (SET ... PX), without the
-- entries no window counts (s <= now - widest), when it is new, every entry
-- left the windows, the dead outnumber the live, totals are lowered, or the
-- TTL must move. On Redis's clock `lasts` is when the TTL ends (µs, TIME's
-- clock): a write needs the key past now + widest, else writes it afresh
-- with a TTL to now + 2 widest, so the TTL moves about once per widest
-- window and a key lives at most a widest window past its reset. On
-- a client clock `lasts` is 0 (unknown) and every write sets PEXPIRE to the
-- reset plus the slack.
--
-- At most `max_entries` live entries (src/algo/sliding_log.rs,
-- MAX_ENTRIES): a call admitted when the log is full joins the newest
-- entry, which takes the call's time, so that weight counts until the
-- later call leaves: a full log errs toward denying. When the oldest live
-- entry's total before it reaches 2^48, every total is lowered by it,
-- keeping totals exact in doubles.
local max_entries = 1000
local rebase_from = 2 ^ 48

local widest = 0
for i = 1, k do
  if windows[i] > widest then widest = windows[i] end
end

-- Entry j's time is the double at byte 16 j + 1 and its total at 16 j + 9,
-- so the total before entry j (base for the first) is at 16 j - 7.
local log = call('GET', key)
local size, newest_at, total = 0, nil, 0
if log then
  size = #log / 16 - 1
  newest_at, total = struct_unpack('<dd', log, 16 * size + 1)
  if newest_at > now then now = newest_at end
end
-- Whether some entry is still in the widest window.
local alive = newest_at and newest_at + widest > now

-- Entries no window counts any more: all before the widest window's first.
local dead = size
local counts = {}
for i = 1, k do
  local window, c = windows[i], 0
  if newest_at and newest_at + window > now then
    -- The first entry the window counts (they are a suffix of the log, the
    -- newest among them), by bisecting: no C call but struct's per step.
    local lo, hi = 1, size
    while lo < hi do
      local mid = lo + hi
      mid = (mid - mid % 2) / 2
      if struct_unpack('<d', log, 16 * mid + 1) + window > now then hi = mid else lo = mid + 1 end
    end
    if window == widest then dead = lo - 1 end
    c = total - struct_unpack('<d', log, 16 * lo - 7)
  end
  counts[i] = c
end
local violated, never = judge(counts)
local taken = violated == 0 and cost or 0

-- Reset: when the newest entry leaves the window; a call that takes is
-- the newest, at now.
-- Each strategy's (`ends`) is replied only when there are several.
local reset, ends = 0, k > 1 and {} or nil
for i = 1, k do
  local e = 0
  if taken > 0 then
    e = windows[i]
  elseif alive then
    e = newest_at + windows[i] - now
    if e < 0 then e = 0 end
  end
  if ends then ends[i] = e end
  if e > reset then reset = e end
end

-- Retry (denials only): for a violated strategy, the weight up to the
-- running total total + cost - L_i must leave; the entry holding it (the
-- first whose total reaches it, found by bisecting) leaves at its time + W_i.
local retry = -1
if violated ~= 0 and not never then
  retry = 0
  for i = 1, k do
    if violates(violated, i) then
      local must_leave = total + cost - limits[i]
      local lo, hi = 1, size
      while lo < hi do
        local mid = lo + hi
        mid = (mid - mid % 2) / 2
        if struct_unpack('<d', log, 16 * mid + 9) >= must_leave then hi = mid else lo = mid + 1 end
      end
      local r = struct_unpack('<d', log, 16 * lo + 1) + windows[i] - now
      retries[i] = r
      if r > retry then retry = r end
    end
  end
end

if taken > 0 and not peek then
  local live = size - dead
  local join = alive and (newest_at == now or live >= max_entries)
  local entry = struct_pack('<dd', now, (alive and total or 0) + taken)
  -- The total before the first live entry, and what every total is lowered
  -- by (totals only grow: read only when the newest's is high).
  local base, lower = 0, 0
  if alive and total >= rebase_from then
    base = struct_unpack('<d', log, 16 * dead + 9)
    if base >= rebase_from then lower = base end
  end
  local lasts = log and struct_unpack('<d', log) or 0
  local stale = lasts ~= 0
  if server_clock then stale = lasts < now + widest end
  if not alive or dead > live or lower > 0 or stale then
    local last = join and size - 1 or size
    -- On a client clock, the reset plus the slack (expire_after's TTL).
    local ms, ends_at = math.floor((widest + now - read_at + 999) / 1000) + slack, 0
    if server_clock then
      ms = math.floor((2 * widest + now - read_at + 999) / 1000)
      -- Redis times the TTL from the script's start, a little before TIME.
      ends_at = read_at + (ms - 1) * 1000
    end
    local value
    if lower == 0 then
      if alive then base = struct_unpack('<d', log, 16 * dead + 9) end
      value = struct_pack('<dd', ends_at, base) .. string.sub(log or '', 16 * dead + 17, 16 * last + 16) .. entry
    else
      local records = {struct_pack('<dd', ends_at, 0)}
      for j = dead + 1, last do
        local at, through = struct_unpack('<dd', log, 16 * j + 1)
        records[#records + 1] = struct_pack('<dd', at, through - lower)
      end
      records[#records + 1] = struct_pack('<dd', now, total + taken - lower)
      value = table.concat(records)
    end
    call('SET', key, value, 'PX', string.format('%d', ms))
  else
    if join then
      call('SETRANGE', key, 16 * size, entry)
    else
      call('APPEND', key, entry)
    end
    if not server_clock then expire_after(reset) end
  end
end

return window_reply(violated, counts, taken, reset, retry, ends)
