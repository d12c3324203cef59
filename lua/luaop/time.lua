-- luaop.time - time as Kubernetes writes it, and the runtime's two clocks.
-- Re-exported by luaop as luaop.time.
local core = require "luaop.core"

-- Time as Kubernetes writes it (RFC 3339, UTC, seconds):
-- time.parse("2026-11-22T10:00:00Z") -> seconds since the epoch (nil when
-- malformed), time.format(seconds) -> "2026-11-22T10:00:00Z"; and the two
-- clocks, time.wall() and time.monotonic().
local time = {}

-- days since 1970-01-01 of a civil date (Howard Hinnant's algorithm)
local function days_from_civil(y, m, d)
  y = m <= 2 and y - 1 or y
  local era = y // 400 -- Lua's // floors, as Hinnant's C does with its adjustment
  local yoe = y - era * 400
  local doy = (153 * (m + (m > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return era * 146097 + doe - 719468
end

local function leap(y) return y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0) end
local month_days = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }

-- parse(s) -> seconds since the epoch | nil, what is wrong with s. RFC 3339
-- as Kubernetes writes it, every field in range (February 29 only in leap
-- years; no leap second, as Go's time.Parse), offsets up to 23:59.
function time.parse(s)
  if type(s) ~= "string" then return nil, "a time must be a string" end
  local y, mo, d, h, mi, sec, frac, zone = s:match("^(%d%d%d%d)%-(%d%d)%-(%d%d)[Tt](%d%d):(%d%d):(%d%d)(%.?%d*)(.*)$")
  if not y then return nil, ("%q is not an RFC 3339 time (YYYY-MM-DDThh:mm:ssZ)"):format(s) end
  y, mo, d, h, mi, sec = tonumber(y), tonumber(mo), tonumber(d), tonumber(h), tonumber(mi), tonumber(sec)
  local function bad(what, v) return nil, ("%q: %s %d is out of range"):format(s, what, v) end
  if mo < 1 or mo > 12 then return bad("month", mo) end
  local days = (mo == 2 and leap(y)) and 29 or month_days[mo]
  if d < 1 or d > days then return bad("day", d) end
  if h > 23 then return bad("hour", h) end
  if mi > 59 then return bad("minute", mi) end
  if sec > 59 then return bad("second", sec) end
  if frac == "." then return nil, ("%q: a fraction needs digits"):format(s) end
  local offset = 0
  if zone ~= "Z" and zone ~= "z" then
    local sign, zh, zm = zone:match("^([+-])(%d%d):(%d%d)$")
    if not sign then return nil, ("%q: the zone must be Z or +hh:mm"):format(s) end
    zh, zm = tonumber(zh), tonumber(zm)
    if zh > 23 then return bad("zone hour", zh) end
    if zm > 59 then return bad("zone minute", zm) end
    offset = (zh * 3600 + zm * 60) * (sign == "+" and 1 or -1)
  end
  local t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset
  -- an offset can carry a time past the years RFC 3339 writes (found by fuzzing)
  if t < -62167219200 or t > 253402300799 then
    return nil, ("%q is outside the years 0000 to 9999 in UTC"):format(s)
  end
  if frac ~= "" then
    -- a fraction a double cannot hold beside the seconds (.999999999 at
    -- year 9999 rounds up to the next second) is dropped: the second stays
    local v = t + tonumber("0" .. frac)
    if math.floor(v) == t then t = v end
  end
  return t
end

-- civil date of days since 1970-01-01 (Howard Hinnant's algorithm)
local function civil_from_days(z)
  z = z + 719468
  local era = z // 146097 -- floors
  local doe = z - era * 146097
  local yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
  local doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
  local mp = (5 * doy + 2) // 153
  local d = doy - (153 * mp + 2) // 5 + 1
  local m = mp < 10 and mp + 3 or mp - 9
  return yoe + era * 400 + (m <= 2 and 1 or 0), m, d
end

-- format(t) -> "YYYY-MM-DDThh:mm:ssZ" (whole seconds, UTC) | nil, err for a
-- time outside the years 0000 to 9999, which RFC 3339 cannot write.
function time.format(t)
  t = math.floor(t)
  local days, secs = t // 86400, t % 86400
  local y, m, d = civil_from_days(days)
  if y < 0 or y > 9999 then return nil, ("%d is outside the years 0000 to 9999"):format(t) end
  return ("%04d-%02d-%02dT%02d:%02d:%02dZ"):format(y, m, d, secs // 3600, secs % 3600 // 60, secs % 60)
end

-- A MicroTime as the API server writes one (Leases, Events): RFC 3339, UTC,
-- microseconds.
function time.format_micro(t)
  local s = math.floor(t)
  local text, err = time.format(s)
  if not text then return nil, err end
  return text:sub(1, -2) .. (".%06dZ"):format(math.floor((t - s) * 1e6))
end

-- The two clocks: wall() is seconds since the epoch, with microseconds
-- (what Kubernetes' times are written in); monotonic() is seconds that
-- only go forward, for durations and deadlines (it says nothing of the date).
time.wall = core.task.wall
time.monotonic = core.task.now

return time
