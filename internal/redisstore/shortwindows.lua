-- quotad's short windows, shared by every quotad process: one call decides,
-- or gives back, a check's units in every short window of one customer's
-- metric at once. Redis runs a script atomically, so the call is all or
-- nothing. The arithmetic is the in-process counter's (internal/quota),
-- exact: Lua numbers are doubles, exact for integers below 2^53, and every
-- value that can pass 2^53 (a token bucket's debt, in 1/T tokens, and the
-- products that make it) is a big number in base-2^24 limbs.
--
-- KEYS, per span: its state (a hash), its sliding log (a list); then per
-- global window of the metric: its state (a hash).
-- ARGV: op (0 peek, 1 take, 2 refund, 3 undo), now (Unix ms; -1: this
-- server's clock), cost, at (undo: when the take counted; -1: now), the
-- number of spans, the number of globals; per span: length (ms),
-- algorithm, threshold, spare (0/1), capacity, ceiling, rate, its global
-- (index, 0: none), and for an undone token bucket the debt right after
-- the take (high and low limbs: hi*2^24 + lo); per global: length (ms) and
-- the span counting in the same window (index, 0: none).
-- Returns: now, allowed (0/1), then four numbers per span (its state when
-- found: see found) and three per global (start, previous, current).
--
-- A key's hash holds a (algorithm) and, by algorithm:
--   sliding and fixed window: s, p, c: start of the current clock-aligned
--     bucket, the previous bucket's count, the current one's;
--   sliding log: s, c: the newest entry's millisecond, the units in the
--     log; the list holds "ms:units" entries, oldest first;
--   token bucket: s, p, h, c: the debt was h*2^24 + c (1/T tokens) at
--     millisecond s, refilled at rate p units per T.

local SW, FW, SL, TB = 0, 1, 2, 3
local B = 16777216              -- 2^24, a limb
local TWO53 = 9007199254740992  -- 2^53
local MAXL = TWO53 - 1          -- the largest limit (tiers.MaxLimit)
-- 2^63 - 2, the latest payoff of a token bucket's debt (maxPayoffMs).
local MAXPAYOFF = {B - 2, B - 1, 32767}

-- Big numbers: tables of limbs, least significant first, no zero on top.

local function trim(t)
  while #t > 0 and t[#t] == 0 do t[#t] = nil end
  return t
end

local function big(n) -- 0 <= n < 2^53
  local t = {}
  while n > 0 do
    local r = math.fmod(n, B)
    t[#t + 1] = r
    n = (n - r) / B
  end
  return t
end

local function cmp(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  for i = #a, 1, -1 do
    if a[i] ~= b[i] then return a[i] < b[i] and -1 or 1 end
  end
  return 0
end

local function add(a, b)
  local t, carry = {}, 0
  for i = 1, math.max(#a, #b) do
    local s = (a[i] or 0) + (b[i] or 0) + carry
    if s >= B then t[i], carry = s - B, 1 else t[i], carry = s, 0 end
  end
  if carry > 0 then t[#t + 1] = carry end
  return t
end

local function sub(a, b) -- a - b, or nil when b > a
  if cmp(a, b) < 0 then return nil end
  local t, borrow = {}, 0
  for i = 1, #a do
    local s = a[i] - (b[i] or 0) - borrow
    if s < 0 then t[i], borrow = s + B, 1 else t[i], borrow = s, 0 end
  end
  return trim(t)
end

local function mul(a, b)
  if #a == 0 or #b == 0 then return {} end
  local t = {}
  for i = 1, #a + #b do t[i] = 0 end
  for i = 1, #a do
    local carry = 0
    for j = 1, #b do
      local s = t[i + j - 1] + a[i] * b[j] + carry -- below 2^49 + 2^25
      local r = math.fmod(s, B)
      t[i + j - 1], carry = r, (s - r) / B
    end
    t[i + #b] = t[i + #b] + carry
  end
  return trim(t)
end

-- divmod returns floor(a/d) and a mod d, for 0 < d < 2^29.
local function divmod(a, d)
  local q, r = {}, 0
  for i = #a, 1, -1 do
    local s = r * B + a[i]
    r = math.fmod(s, d)
    q[i] = (s - r) / d
  end
  return trim(q), r
end

-- num returns a's value, or 2^53 when it is at least that.
local function num(a)
  local v = 0
  for i = #a, 1, -1 do
    if v >= 536870912 then return TWO53 end -- 2^29: v*B would pass 2^53
    v = v * B + a[i]
  end
  return math.min(v, TWO53)
end

-- ceilDiv returns ceil(a/d) for 0 < d < 2^29, or 2^53 when it is at least that.
local function ceilDiv(a, d)
  local q, r = divmod(a, d)
  local v = num(q)
  if r > 0 and v < TWO53 then v = v + 1 end
  return v
end

-- hilo splits a (below 2^77) into high and low limbs: a = hi*2^24 + lo.
local function hilo(a)
  local hi = {}
  for i = 2, #a do hi[i - 1] = a[i] end
  return num(hi), a[1] or 0
end

local function fromHilo(hi, lo) return add(mul(big(hi), {B}), big(lo)) end

-- Small arithmetic, exact below 2^53.

local function mod(a, b) return math.fmod(a, b) end -- a >= 0

-- int formats an integer for a string (a log entry): Lua's own conversion
-- keeps 14 digits. Numbers passed to redis.call need not: Redis converts
-- them exactly.
local function int(n) return string.format('%d', n) end

local function addCap(a, b) -- a + b, at most MAXL
  if a > MAXL - b then return MAXL end
  return a + b
end

-- mulDiv returns floor(a*w/T) for 0 <= a < 2^53, 0 < w <= T < 2^26.
local function mulDiv(a, w, T)
  local r = mod(a, T)
  local q = (a - r) / T
  return q * w + (r * w - mod(r * w, T)) / T
end

-- Clock-aligned buckets (sliding and fixed windows, global usage).

local function roll(st, start, T)
  if st.s == start then return end
  if st.s == start - T then
    st.p, st.c, st.s = st.c, 0, start
  elseif st.s < start then
    st.p, st.c, st.s = 0, 0, start
  end -- st.s > start: the clock stepped back; keep the newer state
end

local function weighted(st, now, T)
  local e = math.min(math.max(now - st.s, 0), T - 1)
  return addCap(mulDiv(st.p, T - e, T), st.c)
end

-- giveBackBuckets takes up to n units off the bucket that starts at start,
-- then off the one before it, and returns how many it took from each.
local function giveBackBuckets(st, start, T, n)
  local fromCur, fromPrev = 0, 0
  if start == st.s then
    fromCur = math.min(n, st.c)
    fromPrev = math.min(n - fromCur, st.p)
  elseif start == st.s - T then
    fromPrev = math.min(n, st.p)
  end
  st.c, st.p = st.c - fromCur, st.p - fromPrev
  return fromCur, fromPrev
end

local function takeFrom(st, start, T, n)
  if start == st.s then
    st.c = st.c - math.min(st.c, n)
  elseif start == st.s - T then
    st.p = st.p - math.min(st.p, n)
  end
end

-- Sliding logs: entries "ms:units", oldest first.

local function entry(v)
  local i = string.find(v, ':', 1, true)
  return tonumber(string.sub(v, 1, i - 1)), tonumber(string.sub(v, i + 1))
end

local function prune(st, logKey, now, T)
  while st.c > 0 do
    local v = redis.call('LINDEX', logKey, 0)
    if not v then st.c = 0; break end
    local ms, n = entry(v)
    if ms > now - T then break end
    redis.call('LPOP', logKey)
    st.c = st.c - n
    st.dirty = true
  end
end

local function logAdd(st, logKey, now, k)
  local v = redis.call('LINDEX', logKey, -1)
  local ms, n
  if v then ms, n = entry(v) end
  if ms and ms >= now then -- this millisecond's entry, or a clock that stepped back
    redis.call('LSET', logKey, -1, int(ms) .. ':' .. int(addCap(n, k)))
  else
    redis.call('RPUSH', logKey, int(now) .. ':' .. int(k))
    st.s = now
  end
  st.c = addCap(st.c, k)
end

-- logWait returns the milliseconds until the log admits k against t, or -1.
local function logWait(st, logKey, now, T, k, t)
  if k > t then return -1 end
  local u = st.c
  if u <= t - k then return 0 end
  for _, v in ipairs(redis.call('LRANGE', logKey, 0, -1)) do
    local ms, n = entry(v)
    u = u - n
    if u <= t - k then return math.max(1, ms + T - now) end
  end
  return -1
end

-- logGiveBack takes up to n units off the log: from the entry of
-- millisecond at first, then (unless only that entry) from the newest.
local function logGiveBack(st, logKey, at, n, onlyAt)
  local entries = redis.call('LRANGE', logKey, 0, -1)
  local ms, units = {}, {}
  for i, v in ipairs(entries) do ms[i], units[i] = entry(v) end
  local left = n
  for i = 1, #ms do
    if ms[i] == at then
      local d = math.min(left, units[i]); units[i] = units[i] - d; left = left - d
    end
  end
  if not onlyAt then
    for i = #ms, 1, -1 do
      if left == 0 then break end
      local d = math.min(left, units[i]); units[i] = units[i] - d; left = left - d
    end
  end
  redis.call('DEL', logKey)
  local kept = {}
  for i = 1, #ms do
    if units[i] > 0 then kept[#kept + 1] = int(ms[i]) .. ':' .. int(units[i]); st.s = ms[i] end
  end
  for i = 1, #kept, 1000 do -- unpack takes a few thousand values at most
    redis.call('RPUSH', logKey, unpack(kept, i, math.min(i + 999, #kept)))
  end
  st.c = st.c - (n - left)
  return n - left
end

-- Token buckets.

-- debt returns the bucket's debt at now, in 1/T tokens.
local function debt(st, now)
  local d = fromHilo(st.h, st.c)
  if st.p == 0 then return d end
  if now >= st.s then
    return sub(d, mul(big(now - st.s), big(st.p))) or {}
  end
  return add(d, mul(big(st.s - now), big(st.p))) -- a clock that stepped back
end

-- room returns maxPayoffMs - now - 1: a debt is kept while ceil(debt/rate) is at most that.
local function room(now) return sub(MAXPAYOFF, big(now + 1)) end

-- setDebt stores debt d at now for rate: with rate 0 as whole tokens, at
-- most MAXL; otherwise paid off by maxPayoffMs at the latest.
local function setDebt(st, d, now, rate, T)
  if rate == 0 then
    d = mul(big(math.min(ceilDiv(d, T), MAXL)), big(T))
  elseif cmp(d, mul(room(now), big(rate))) > 0 then
    d = mul(add(room(now), {1}), big(rate))
  end
  st.h, st.c = hilo(d)
  st.s, st.p = now, rate
  st.dirty = true
end

-- State of a span's key.

local function load(key)
  local v = redis.call('HMGET', key, 'a', 's', 'p', 'c', 'h')
  if not v[1] then return nil end
  return {a = tonumber(v[1]), s = tonumber(v[2]) or 0, p = tonumber(v[3]) or 0,
          c = tonumber(v[4]) or 0, h = tonumber(v[5]) or 0}
end

-- count returns the key's count at now (2^53 for a token bucket's count
-- at least that).
local function count(st, now, T)
  if st.a == SW then return weighted(st, now, T) end
  if st.a == TB then return ceilDiv(debt(st, now), T) end
  return st.c
end

-- span returns span i's key state at now, created empty if missing,
-- rolled, and converted from another algorithm (or rate) keeping its
-- count as if admitted now.
local function span(key, logKey, alg, rate, now, T)
  local st = load(key)
  if not st then
    st = {a = alg, s = 0, p = 0, c = 0, h = 0, fresh = true}
    if alg == TB then st.s, st.p = now, rate end
  end
  if st.a ~= alg or (alg == TB and st.p ~= rate) then
    local used, d
    if st.a == SL then prune(st, logKey, now, T); redis.call('DEL', logKey) end
    if st.a == TB then
      d = debt(st, now)
      used = math.min(ceilDiv(d, T), MAXL)
    else
      if st.a ~= SL then roll(st, now - mod(now, T), T) end
      used = math.min(count(st, now, T), MAXL)
    end
    local from = st.a
    st = {a = alg, s = 0, p = 0, c = 0, h = 0, dirty = true}
    if alg == TB then
      if from ~= TB then d = mul(big(used), big(T)) end
      setDebt(st, d, now, rate, T)
    elseif alg == SL then
      if used > 0 then logAdd(st, logKey, now, used) end
    else
      st.s, st.c = now - mod(now, T), used
    end
  end
  if alg == SW or alg == FW then
    roll(st, now - mod(now, T), T)
  elseif alg == SL then
    prune(st, logKey, now, T)
  end
  return st
end

local function save(key, logKey, st, T, now)
  if st.a == TB then
    redis.call('HSET', key, 'a', st.a, 's', st.s, 'p', st.p, 'c', st.c, 'h', st.h)
    if st.p == 0 then
      if st.c == 0 and st.h == 0 then redis.call('PEXPIRE', key, T) else redis.call('PERSIST', key) end
    else
      -- Until the debt is paid off, and a window more; at most ten years.
      local ms = num(divmod(fromHilo(st.h, st.c), st.p)) + 1
      redis.call('PEXPIRE', key, math.min(math.max(st.s - now, 0) + ms, 315360000000) + T)
    end
    return
  end
  -- A token bucket's h, if the key was one, stays: only a token bucket
  -- reads it, and it writes it.
  redis.call('HSET', key, 'a', st.a, 's', st.s, 'p', st.p, 'c', st.c)
  redis.call('PEXPIRE', key, 3 * T)
  if st.a == SL then redis.call('PEXPIRE', logKey, 3 * T) end
end

-- found returns what a caller needs of a span's state to report on it:
-- buckets: start, previous, current; a log: its newest millisecond, its
-- units, and (denied only) how long until it admits the cost within the
-- threshold and within the ceiling; a token bucket: its debt at now (high
-- and low limbs).
local function found(st, logKey, now, T, cost, thr, spare, ceiling, passed)
  if st.a == TB then
    local hi, lo = hilo(debt(st, now))
    return hi, lo, 0, 0
  end
  if st.a == SL then
    local wt, wc = 0, 0
    if not passed then
      wt = logWait(st, logKey, now, T, cost, thr)
      if spare == 1 then wc = logWait(st, logKey, now, T, cost, ceiling) end
    end
    return st.s, st.c, wt, wc
  end
  return st.s, st.p, st.c, 0
end

-- The call.

local op = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local cost = tonumber(ARGV[3])
local at = tonumber(ARGV[4])
if at < 0 then at = now end
local nspans, nglobals = tonumber(ARGV[5]), tonumber(ARGV[6])
local SPAN, GLOBAL = 10, 2

local spans, globals = {}, {}
for i = 1, nspans do
  local a = 6 + (i - 1) * SPAN
  spans[i] = {key = KEYS[2 * i - 1], log = KEYS[2 * i], T = tonumber(ARGV[a + 1]), alg = tonumber(ARGV[a + 2]),
    thr = tonumber(ARGV[a + 3]), spare = tonumber(ARGV[a + 4]), capacity = tonumber(ARGV[a + 5]),
    ceiling = tonumber(ARGV[a + 6]), rate = tonumber(ARGV[a + 7]), g = tonumber(ARGV[a + 8]),
    tookHi = tonumber(ARGV[a + 9]), tookLo = tonumber(ARGV[a + 10])}
end
for j = 1, nglobals do
  local a = 6 + nspans * SPAN + (j - 1) * GLOBAL
  globals[j] = {key = KEYS[2 * nspans + j], T = tonumber(ARGV[a + 1]), span = tonumber(ARGV[a + 2])}
end

-- global returns global window j's state at ms, rolled; a missing key
-- reads as empty, or as nil unless create.
local function global(j, ms, create)
  local g = globals[j]
  local st = load(g.key)
  if not st then
    if not create then return nil end
    st = {a = SW, s = ms - mod(ms, g.T), p = 0, c = 0, h = 0}
  end
  roll(st, ms - mod(ms, g.T), g.T)
  g.st = st
  return st
end

local function saveGlobal(g)
  redis.call('HSET', g.key, 'a', SW, 's', g.st.s, 'p', g.st.p, 'c', g.st.c)
  redis.call('PEXPIRE', g.key, 3 * g.T)
end

local out = {now, 1}

if op <= 1 then -- peek, take
  local allowed = true
  for j = 1, nglobals do global(j, now, true) end
  for i = 1, nspans do
    local sp = spans[i]
    local st = span(sp.key, sp.log, sp.alg, sp.rate, now, sp.T)
    sp.st = st
    local used = count(st, now, sp.T)
    local ok = used <= sp.thr - cost
    if not ok and sp.spare == 1 and sp.g > 0 then
      local gu = weighted(globals[sp.g].st, now, sp.T)
      ok = gu <= sp.capacity - cost and used <= sp.ceiling - cost
    end
    if ok and sp.alg == TB and sp.rate > 0 then
      -- The debt with the cost must be paid off by maxPayoffMs.
      sp.next = add(debt(st, now), mul(big(cost), big(sp.T)))
      ok = cmp(sp.next, mul(room(now), big(sp.rate))) <= 0
    end
    sp.passed = ok
    allowed = allowed and ok
  end
  for i = 1, nspans do
    local sp = spans[i]
    local a, b, c, d = found(sp.st, sp.log, now, sp.T, cost, sp.thr, sp.spare, sp.ceiling, sp.passed)
    out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = a, b, c, d
  end
  for j = 1, nglobals do
    local st = globals[j].st
    out[#out + 1], out[#out + 2], out[#out + 3] = st.s, st.p, st.c
  end
  if not allowed then out[2] = 0 end
  if op == 1 and allowed then
    for i = 1, nspans do
      local sp = spans[i]
      local st = sp.st
      if sp.alg == SL then
        logAdd(st, sp.log, now, cost)
      elseif sp.alg == TB then
        setDebt(st, sp.next or add(debt(st, now), mul(big(cost), big(sp.T))), now, sp.rate, sp.T)
      else
        st.c = addCap(st.c, cost)
      end
      st.dirty = true
    end
    for j = 1, nglobals do
      local g = globals[j]
      g.st.c = addCap(g.st.c, cost)
      saveGlobal(g)
    end
  end
  for i = 1, nspans do
    local sp = spans[i]
    if sp.st.dirty then save(sp.key, sp.log, sp.st, sp.T, now) end
  end
  return out
end

-- Refund and undo: each span gives back up to cost units, never below zero
-- (see quota's Counter.GiveBack); each global window what its span gave.
local undo = op == 3
for i = 1, nspans do
  local sp = spans[i]
  local ms = at
  if sp.alg == TB then ms = now end -- a bucket's debt is read now
  local st = span(sp.key, sp.log, sp.alg, sp.rate, ms, sp.T)
  local a, b, c, d = found(st, sp.log, ms, sp.T, cost, sp.thr, 0, 0, true)
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = a, b, c, d
  if sp.alg == SW or sp.alg == FW then
    sp.start = st.s
    sp.cur, sp.prev = giveBackBuckets(st, at - mod(at, sp.T), sp.T, cost)
  else
    sp.start, sp.prev = at - mod(at, sp.T), 0
    if sp.alg == SL then
      sp.cur = logGiveBack(st, sp.log, at, cost, undo)
    else
      local before = count(st, now, sp.T)
      local owed = mul(big(cost), big(sp.T))
      if undo then
        -- What the take still owes: its debt less the refill since.
        local left = sub(fromHilo(sp.tookHi, sp.tookLo), mul(big(math.max(0, now - at)), big(sp.rate))) or {}
        if cmp(left, owed) < 0 then owed = left end
      end
      setDebt(st, sub(debt(st, now), owed) or {}, now, sp.rate, sp.T)
      sp.cur = before - count(st, now, sp.T)
    end
  end
  if (sp.cur > 0 or sp.prev > 0 or st.dirty) and not st.fresh then save(sp.key, sp.log, st, sp.T, ms) end
end
for j = 1, nglobals do
  local g = globals[j]
  local st = global(j, at, false)
  if st then
    local sp = spans[g.span]
    if not sp then
      giveBackBuckets(st, at - mod(at, g.T), g.T, cost)
    elseif sp.alg == SL or sp.alg == TB then
      local n = sp.cur
      if undo then n = cost end -- a take undone: the metric counted all of it
      giveBackBuckets(st, sp.start, g.T, n)
    else
      takeFrom(st, sp.start, g.T, sp.cur)
      takeFrom(st, sp.start - g.T, g.T, sp.prev)
    end
    saveGlobal(g)
  end
  out[#out + 1], out[#out + 2], out[#out + 3] = 0, 0, 0
end
return out
