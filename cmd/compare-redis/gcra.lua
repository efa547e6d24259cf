-- GCRA (generic cell rate algorithm) on one key, in the style of
-- go-redis/redis_rate's allowN script: the key holds the theoretical arrival
-- time (TAT) of the next permit; a decision is allowed while the TAT, after
-- adding this decision's cost, runs no further ahead of now than the burst
-- tolerance.
--
-- Times are integer nanoseconds since ARGV[4] (Unix seconds, chosen by the
-- caller close to now), so that every value stays an exact integer in Lua's
-- doubles (exact up to 2^53 ns, about 104 days after the epoch). Redis's
-- clock (TIME, microsecond resolution) is the only clock used.
--
-- KEYS[1]  the limit's key
-- ARGV[1]  emission interval: nanoseconds per permit (integer >= 1)
-- ARGV[2]  burst: permits the TAT may run ahead of now (integer >= 1)
-- ARGV[3]  cost: permits in this decision (integer >= 1)
-- ARGV[4]  epoch: Unix seconds that time is counted from
--
-- Returns {allowed, remaining, retry_after_ns, reset_after_ns}:
-- allowed is the cost when allowed and 0 when refused; remaining is how many
-- more permits could be allowed now; retry_after_ns is -1 when allowed, else
-- how long until this decision would be allowed; reset_after_ns is how long
-- until the key is back to its idle state.

-- TIME is non-deterministic: replicate effects, not the script (the default
-- from Redis 5 on; the call is kept for older servers).
if redis.replicate_commands then
  redis.replicate_commands()
end

local key = KEYS[1]
local emission = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local epoch = tonumber(ARGV[4])

local t = redis.call("TIME")
local now = (tonumber(t[1]) - epoch) * 1000000000 + tonumber(t[2]) * 1000

local tat = tonumber(redis.call("GET", key))
if tat == nil or tat < now then
  tat = now
end

local new_tat = tat + emission * cost
local allow_at = new_tat - emission * burst
local diff = now - allow_at

if diff < 0 then
  return {0, 0, -diff, tat - now}
end

local reset_after = new_tat - now
redis.call("SET", key, string.format("%d", new_tat), "PX", math.ceil(reset_after / 1000000))
return {cost, math.floor(diff / emission), -1, reset_after}
