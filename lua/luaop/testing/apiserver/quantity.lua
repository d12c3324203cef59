-- luaop.testing.apiserver.quantity - Kubernetes quantities ("500m", "1536Mi") parsed and
-- written back in canonical form as apimachinery's resource.Quantity does
-- (ParseQuantity, then String): a part of luaop.testing.apiserver.
--
--   quantity.canonical("0.5")    --> "500m"
--   quantity.canonical("1.5Gi")  --> "1536Mi"
--   quantity.canonical("1x")     --> nil, "quantities must match the regular expression ..."
--
-- Exact: the arithmetic is on decimal digit strings, so no float is involved.
-- Like the Go code, a string already in canonical form comes back as given
-- ("100Mi", "1e3", "+2", "01"), values finer than 1n are rounded up (away
-- from zero) to 1n, and binary values are capped at 2^63-1.

local M = {}

local SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
M.ERR_FORMAT = "quantities must match the regular expression '" .. SPLIT_RE .. "'"
M.ERR_NUMERIC = "unable to parse numeric part of quantity"
M.ERR_SUFFIX = "unable to parse quantity's suffix"

local MAX_INT64 = "9223372036854775807"

-- suffix -> base, exponent, format ("dec", "bin", "exp")
local SUFFIXES = {
  [""] = { 10, 0, "dec" }, n = { 10, -9, "dec" }, u = { 10, -6, "dec" }, m = { 10, -3, "dec" },
  k = { 10, 3, "dec" }, M = { 10, 6, "dec" }, G = { 10, 9, "dec" }, T = { 10, 12, "dec" },
  P = { 10, 15, "dec" }, E = { 10, 18, "dec" },
  Ki = { 2, 10, "bin" }, Mi = { 2, 20, "bin" }, Gi = { 2, 30, "bin" }, Ti = { 2, 40, "bin" },
  Pi = { 2, 50, "bin" }, Ei = { 2, 60, "bin" },
}
local DEC_NAMES = { [-9] = "n", [-6] = "u", [-3] = "m", [0] = "", [3] = "k", [6] = "M", [9] = "G", [12] = "T",
  [15] = "P", [18] = "E" }
local BIN_NAMES = { [10] = "Ki", [20] = "Mi", [30] = "Gi", [40] = "Ti", [50] = "Pi", [60] = "Ei" }

local function interpret(suf)
  local s = SUFFIXES[suf]
  if s then return s[1], s[2], s[3] end
  if #suf > 1 and (suf:sub(1, 1) == "e" or suf:sub(1, 1) == "E") then
    local n = suf:sub(2):match("^[+-]?%d+$") and math.tointeger(tonumber(suf:sub(2)))
    if n and n >= -2147483648 and n <= 2147483647 then return 10, n, "exp" end
  end
  return nil
end

-- ---- decimal digit strings (no sign, no leading zeros, "0" for zero) ----------------------

local function strip(d)
  d = d:gsub("^0+", "")
  return d == "" and "0" or d
end

local function mul_small(d, m)
  if d == "0" or m == 0 then return "0" end
  local out, carry = {}, 0
  for i = #d, 1, -1 do
    local x = (d:byte(i) - 48) * m + carry
    out[#out + 1] = x % 10
    carry = x // 10
  end
  while carry > 0 do
    out[#out + 1] = carry % 10
    carry = carry // 10
  end
  local s = {}
  for i = #out, 1, -1 do s[#s + 1] = out[i] end
  return strip(table.concat(s))
end

local function divmod_small(d, m)
  local q, r = {}, 0
  for i = 1, #d do
    local x = r * 10 + d:byte(i) - 48
    q[#q + 1] = x // m
    r = x % m
  end
  return strip(table.concat(q)), r
end

local function add_one(d)
  local digits = { d:byte(1, -1) }
  local i = #digits
  while i >= 1 and digits[i] == 57 do
    digits[i] = 48
    i = i - 1
  end
  if i == 0 then return "1" .. string.char(table.unpack(digits)) end
  digits[i] = digits[i] + 1
  return string.char(table.unpack(digits))
end

-- a < b for digit strings
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

-- ---- parsing, as apimachinery's parseQuantityString --------------------------------------

local SUFFIX_CHARS = "[eEinumkKMGTP]"

local function scan(str)
  local positive, pos, n = true, 1, #str
  local c = str:sub(1, 1)
  if c == "-" then
    positive, pos = false, 2
  elseif c == "+" then
    pos = 2
  end
  while pos <= n and str:sub(pos, pos) == "0" do pos = pos + 1 end
  if pos > n then return positive, "0", "", "" end
  local num_end = pos
  while num_end <= n and str:sub(num_end, num_end):match("%d") do num_end = num_end + 1 end
  local num = str:sub(pos, num_end - 1)
  if num == "" then num = "0" end
  pos = num_end
  local denom = ""
  if pos <= n and str:sub(pos, pos) == "." then
    pos = pos + 1
    local d_end = pos
    while d_end <= n and str:sub(d_end, d_end):match("%d") do d_end = d_end + 1 end
    denom = str:sub(pos, d_end - 1)
    pos = d_end
  end
  local suf_start = pos
  while pos <= n and str:sub(pos, pos):match(SUFFIX_CHARS) do pos = pos + 1 end
  local c2 = str:sub(pos, pos)
  if c2 == "-" or c2 == "+" then pos = pos + 1 end
  while pos <= n and str:sub(pos, pos):match("%d") do pos = pos + 1 end
  if pos <= n then return nil, M.ERR_FORMAT end
  return positive, num, denom, str:sub(suf_start)
end

-- Whether ParseQuantity keeps the string as given (its fast path's test of canonical form).
local function kept(num, denom, base, exponent, format)
  local scale, mantissa, precision = 0, 1
  if format ~= "bin" then
    scale, precision = exponent, 18 - (#num + #denom)
  elseif exponent >= 0 and #denom == 0 then
    mantissa = 1 << exponent
    precision = 15 - #num - (exponent * 3 // 10) - 1
  else
    precision = -1
  end
  if precision < 0 then return false end
  scale = scale - #denom
  if scale < -9 then return false end
  local shifted = num .. denom
  local value = math.tointeger(tonumber(shifted))
  if not value or #strip(shifted) > 19 or less(MAX_INT64, strip(shifted)) then return false end
  if value ~= 0 and mantissa ~= 1 and value > math.maxinteger // mantissa then return false end
  if base == 2 then return exponent % 10 == 0 and value & 7 ~= 0 end
  return scale % 3 == 0 and shifted:sub(-3) ~= "000" and shifted:sub(1, 1) ~= "0"
end

-- digits d times 10^e rounded up (away from zero) to 10^scale: d, e, whether exact.
local function round_up(d, e, scale)
  if d == "0" or e >= scale then return d, e, true end
  local cut = scale - e
  local head = #d > cut and d:sub(1, #d - cut) or "0"
  local tail = #d > cut and d:sub(#d - cut + 1) or d
  if tail:match("[1-9]") then return add_one(strip(head)), scale, false end
  return strip(head), scale, true
end

-- The canonical string of an amount: digits d times 10^e, sign, format.
local function write(negative, d, e, format)
  if d == "0" then return "0" end
  local sign = negative and "-" or ""
  if format == "bin" then
    -- below 1024 in magnitude, or not a whole number: decimal
    local int, ie, exact = round_up(d, e, 0)
    int = int .. ("0"):rep(ie)
    if less(int, "1024") and exact then
      format = "dec"
    elseif exact then
      local p = 0
      while true do
        local q, r = divmod_small(int, 1024)
        if r ~= 0 or q == "0" then break end
        int, p = q, p + 10
      end
      return sign .. int .. (BIN_NAMES[p] or "")
    else
      format = "dec"
    end
  end
  local t = d:match("0*$")
  if #t > 0 then d, e = d:sub(1, #d - #t), e + #t end
  while e % 3 ~= 0 do d, e = d .. "0", e - 1 end
  if format == "exp" then return sign .. d .. (e == 0 and "" or "e" .. e) end
  return sign .. d .. (DEC_NAMES[e] or "")
end

-- The canonical form of a quantity (a string, or a number as a JSON number
-- is read) | nil, the API server's error message. milli: rounded up to
-- the milli as core/v1's defaults round every ResourceList's values.
function M.canonical(q, milli)
  if math.type(q) == "integer" then
    q = tostring(q)
  elseif type(q) == "number" then
    -- the shortest text that reads back the same, as a JSON number is written
    local s
    for p = 15, 17 do
      s = ("%." .. p .. "g"):format(q)
      if tonumber(s) == q then break end
    end
    q = s
  end
  if type(q) ~= "string" then return nil, M.ERR_FORMAT end
  local str = q:match("^%s*(.-)%s*$")
  if str == "" then return nil, M.ERR_FORMAT end
  if str == "0" then return "0" end
  local positive, num, denom, suf = scan(str)
  if positive == nil then return nil, num end
  local base, exponent, format = interpret(suf)
  if not base then return nil, M.ERR_SUFFIX end
  local keep = kept(num, denom, base, exponent, format)
  -- inf.Dec's SetString of the numeric part
  if num == "0" and denom == "" and not str:match("^[+-]?0") then return nil, M.ERR_NUMERIC end
  local d, e = strip(num .. denom), -#denom
  if base == 10 then
    e = e + exponent
  else
    for _ = 1, exponent // 10 do d = mul_small(d, 1024) end
  end
  local exact
  d, e = round_up(d, e, -9)
  if format == "bin" and e >= 0 and less(MAX_INT64, d .. ("0"):rep(e)) then
    d, e = MAX_INT64, 0
  elseif format == "bin" and e < 0 then
    local int = #d > -e and d:sub(1, #d + e) or "0"
    if less(MAX_INT64, strip(int)) or (strip(int) == MAX_INT64 and d:sub(#d + e + 1):match("[1-9]")) then
      d, e = MAX_INT64, 0
    end
  end
  if milli then
    d, e, exact = round_up(d, e, -3)
    keep = keep and exact
  end
  if keep then return str end
  return write(not positive, d, e, format)
end

return M
