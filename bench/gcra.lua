-- GCRA (generic cell rate algorithm) with the arguments and reply of
-- redis-cell's CL.THROTTLE, as a Redis script: the "Redis + Lua" reference
-- that the load generator compares servers against.
--
--   EVALSHA sha 1 key max_burst count_per_period period [quantity]
--   -> {limited, limit, remaining, retry_after, reset_after}
--
-- period is whole seconds; retry_after and reset_after are whole seconds,
-- truncated plus one when the remainder is at least 1 ms (redis-cell's rule),
-- retry_after -1 when allowed or when the request can never be allowed.
--
-- The key stores the theoretical arrival time (TAT) in microseconds since the
-- Unix epoch and expires at the TAT. Microseconds, not nanoseconds: Lua
-- numbers are doubles, exact only up to 2^53, and nanoseconds since the epoch
-- are beyond that.

local function int_arg(i, name)
  local v = tonumber(ARGV[i])
  if v == nil or v ~= math.floor(v) or v > 9007199254740991 or v < -9007199254740991 then
    return nil, 'ERR value is not an integer or out of range (' .. name .. ')'
  end
  return v
end

local key = KEYS[1]
if key == nil or #ARGV < 3 or #ARGV > 4 then
  return redis.error_reply('ERR wrong number of arguments for GCRA script')
end
local max_burst, err = int_arg(1, 'max_burst')
if err then return redis.error_reply(err) end
local count, err2 = int_arg(2, 'count_per_period')
if err2 then return redis.error_reply(err2) end
local period, err3 = int_arg(3, 'period')
if err3 then return redis.error_reply(err3) end
local quantity = 1
if #ARGV == 4 then
  local q, err4 = int_arg(4, 'quantity')
  if err4 then return redis.error_reply(err4) end
  quantity = q
end
if max_burst < 0 or count <= 0 or period <= 0 then
  return redis.error_reply('ERR max_burst must be >= 0, count_per_period and period > 0')
end

-- Emission interval T (truncated to whole microseconds, as redis-cell
-- truncates to nanoseconds), delay tolerance tau, and the limit.
local interval = math.floor(period * 1000000 / count)
if interval <= 0 then
  return redis.error_reply('ERR rate too high: emission interval below 1 microsecond')
end
local tolerance = interval * (max_burst + 1)
local limit = max_burst + 1

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local stored = redis.call('GET', key)
local tat = now
if stored then
  tat = tonumber(stored) or now
end

local increment = interval * quantity
local new_tat = math.max(tat, now) + increment
local allow_at = new_tat - tolerance
local diff = now - allow_at

local limited = 0
local retry_after = -1
local ttl
if diff < 0 then
  limited = 1
  if increment <= tolerance then
    retry_after = -diff
  end
  ttl = tat - now
else
  ttl = new_tat - now
  if ttl > 0 then
    -- SET with PX stores the TAT and its expiry in one step: the key
    -- vanishes exactly when the limiter is back to fresh.
    redis.call('SET', key, string.format('%.0f', new_tat), 'PX', math.ceil(ttl / 1000))
  else
    redis.call('DEL', key)
  end
end
if ttl < 0 then ttl = 0 end

local remaining = 0
local next = tolerance - ttl
if next > -interval then
  remaining = next / interval
  if remaining >= 0 then remaining = math.floor(remaining) else remaining = math.ceil(remaining) end
end

-- Microseconds to redis-cell's whole seconds.
local function seconds(us)
  if us < 0 then return -1 end
  local s = math.floor(us / 1000000)
  if us % 1000000 >= 1000 then s = s + 1 end
  return s
end

return {limited, limit, remaining, seconds(retry_after), seconds(ttl)}
