-- quotad's short windows, shared by every quotad process. This script
-- decides nothing: a process decides each check with its in-process code
-- on the states it last saw, and the script writes the states a decision
-- left only if every key of the check still holds what the decision saw,
-- all of them at once (Redis runs a script atomically). Either way it
-- answers with what the keys held, so that a process that saw an older
-- state decides again on the current one. One call carries the checks a
-- process made meanwhile, one after the other, each all or nothing.
--
-- KEYS: every check's keys, check after check, in one hash slot.
-- ARGV: the number of checks; then per check: its number of keys, 1 to
-- write or 0 to only read, then per key the state expected ("" for no
-- key), the state to write ("" deletes the key) and its expiry in
-- milliseconds (0: none).
-- Returns the server's time (seconds, microseconds), then per check 1 if
-- it wrote and 0 if not, and what each of its keys held ("" for no key).

local t = redis.call('TIME')
local out = {t[1], t[2]}
local k, a = 0, 2
for _ = 1, tonumber(ARGV[1]) do
  local n, write = tonumber(ARGV[a]), ARGV[a + 1] == '1'
  a = a + 2
  local keys = {unpack(KEYS, k + 1, k + n)}
  local found = redis.call('MGET', unpack(keys))
  for i = 1, n do
    found[i] = found[i] or ''
    if found[i] ~= ARGV[a + 3 * i - 3] then write = false end
  end
  if write then
    for i = 1, n do
      local state, ttl = ARGV[a + 3 * i - 2], ARGV[a + 3 * i - 1]
      if state == '' then
        redis.call('DEL', keys[i])
      elseif ttl == '0' then
        redis.call('SET', keys[i], state)
      else
        redis.call('SET', keys[i], state, 'PX', ttl)
      end
    end
  end
  out[#out + 1] = write and 1 or 0
  for i = 1, n do out[#out + 1] = found[i] end
  k, a = k + n, a + 3 * n
end
return out
