-- quotad's short windows, shared by every quotad process. This script
-- decides nothing: a process decides each check with its in-process code
-- on the states it last saw, and the script writes the states the decision
-- left only if every key of the check still holds what the decision saw,
-- all of them at once (Redis runs a script atomically). Either way it
-- answers with what the keys held, so that a process that saw an older
-- state decides again on the current one.
--
-- KEYS: the check's keys (strings), in one hash slot.
-- ARGV: 1 to write, 0 to only read; then per key the state expected (""
-- for no key), the state to write ("" deletes the key) and its expiry in
-- milliseconds (0: none).
-- Returns the server's time (seconds, microseconds), 1 if it wrote and 0
-- if not, then what each key held ("" for no key).

local found = redis.call('MGET', unpack(KEYS))
local write = ARGV[1] == '1'
for i = 1, #KEYS do
  found[i] = found[i] or ''
  if found[i] ~= ARGV[3 * i - 1] then write = false end
end
if write then
  for i = 1, #KEYS do
    local state, ttl = ARGV[3 * i], ARGV[3 * i + 1]
    if state == '' then
      redis.call('DEL', KEYS[i])
    elseif ttl == '0' then
      redis.call('SET', KEYS[i], state)
    else
      redis.call('SET', KEYS[i], state, 'PX', ttl)
    end
  end
end
local t = redis.call('TIME')
return {t[1], t[2], write and 1 or 0, unpack(found)}
