-- quotad's short windows, shared by every quotad process. This script
-- decides nothing: a process decides each check with its in-process code
-- on the states it last saw, and the script writes the states a decision
-- left only if every key of the check still holds what the decision saw,
-- all of them at once (Redis runs a script atomically). Otherwise it
-- answers with what the keys held, so that a process that saw an older
-- state decides again on the current one. One call carries the checks a
-- process made meanwhile, one after the other, each all or nothing.
--
-- KEYS: every check's keys, check after check, in one hash slot.
-- ARGV: the number of checks; then per check: its number of keys, n to
-- write, -n to only read; then per key the state expected ("" for no
-- key) and, to write, the state to write ("" deletes the key) and its
-- expiry in milliseconds (0: none).
-- Returns the server's time (Unix ms), then per check 1 if it wrote, 2 if
-- it only read and every key held what it expected, else 0 followed by
-- what each of its keys held ("" for no key). So the common answers are a
-- number a check.

local t = redis.call('TIME')
local out = {t[1] * 1000 + math.floor(t[2] / 1000)}
local k, a = 0, 2
for _ = 1, tonumber(ARGV[1]) do
  local n = tonumber(ARGV[a])
  local write, step = n > 0, 3
  if not write then n, step = -n, 1 end
  a = a + 1
  local found
  if n == 1 then
    found = {redis.call('GET', KEYS[k + 1])}
  else
    found = redis.call('MGET', unpack(KEYS, k + 1, k + n))
  end
  local same = true
  for i = 1, n do
    found[i] = found[i] or ''
    if found[i] ~= ARGV[a + step * (i - 1)] then same = false end
  end
  if not same then
    out[#out + 1] = 0
    for i = 1, n do out[#out + 1] = found[i] end
  elseif write then
    for i = 1, n do
      local key, state, ttl = KEYS[k + i], ARGV[a + 3 * i - 2], ARGV[a + 3 * i - 1]
      if state == '' then
        redis.call('DEL', key)
      elseif ttl == '0' then
        redis.call('SET', key, state)
      else
        redis.call('SET', key, state, 'PX', ttl)
      end
    end
    out[#out + 1] = 1
  else
    out[#out + 1] = 2
  end
  k, a = k + n, a + step * n
end
return out
