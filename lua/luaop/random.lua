-- luaop.random - math.random and math.randomseed with a generator of their
-- own, one per script (luaop.script): Lua's keep their state in one
-- userdata every script would share, so a seed one script set would decide
-- the numbers another draws (its random names, its jitter).
--
-- The same generator as Lua 5.4's (xoshiro256**), with its interface: random()
-- a float in [0, 1), random(m) an integer in [1, m], random(m, n) one in
-- [m, n], random(0) any integer; randomseed([x [, y]]) seeds it (without
-- arguments, at random) and returns the two seed numbers.
local M = {}

local function rotl(x, n)
  return (x << n) | (x >> (64 - n))
end

local function nextrand(s)
  local s0, s1, s2, s3 = s[1], s[2], s[3], s[4]
  local res = rotl(s1 * 5, 7) * 9
  local t = s1 << 17
  s2 = s2 ~ s0
  s3 = s3 ~ s1
  s1 = s1 ~ s2
  s0 = s0 ~ s3
  s2 = s2 ~ t
  s3 = rotl(s3, 45)
  s[1], s[2], s[3], s[4] = s0, s1, s2, s3
  return res
end

-- ran projected into [0, n] (unsigned), as Lua's project()
local function project(ran, n, s)
  if n & (n + 1) == 0 then return ran & n end -- n + 1 a power of 2
  local lim = n
  lim = lim | (lim >> 1)
  lim = lim | (lim >> 2)
  lim = lim | (lim >> 4)
  lim = lim | (lim >> 8)
  lim = lim | (lim >> 16)
  lim = lim | (lim >> 32)
  ran = ran & lim
  while math.ult(n, ran) do ran = nextrand(s) & lim end
  return ran
end

local function integer(v, i, fname)
  local n = math.tointeger(v)
  if n == nil then
    if type(v) == "number" then
      error(("bad argument #%d to '%s' (number has no integer representation)"):format(i, fname), 3)
    end
    error(("bad argument #%d to '%s' (number expected, got %s)"):format(i, fname,
      v == nil and "no value" or type(v)), 3)
  end
  return n
end

local function setseed(s, n1, n2)
  s[1], s[2], s[3], s[4] = n1, 0xff, n2, 0
  for _ = 1, 16 do nextrand(s) end
  return n1, n2
end

-- random, randomseed: a new generator, seeded at random.
function M.new(seed1, seed2)
  local s = {}
  local function random(...)
    local nargs = select("#", ...)
    local rv = nextrand(s)
    local low, up
    if nargs == 0 then
      return (rv >> 11) * 0x1p-53
    elseif nargs == 1 then
      low, up = 1, integer((...), 1, "random")
      if up == 0 then return rv end
    elseif nargs == 2 then
      local a, b = ...
      low, up = integer(a, 1, "random"), integer(b, 2, "random")
    else
      error("wrong number of arguments", 2)
    end
    if low > up then error("bad argument #1 to 'random' (interval is empty)", 2) end
    return project(rv, up - low, s) + low
  end
  local function randomseed(...)
    if select("#", ...) == 0 then
      return setseed(s, math.random(0), math.random(0))
    end
    local a, b = ...
    local n1 = math.type(a) == "float" and math.tointeger(a) == nil and string.unpack("j", string.pack("n", a))
      or integer(a, 1, "randomseed")
    local n2 = b == nil and 0 or integer(b, 2, "randomseed")
    return setseed(s, n1, n2)
  end
  setseed(s, seed1 or math.random(0), seed2 or math.random(0))
  return random, randomseed
end

return M
