-- luaop.cjson - lua-cjson's interface over luaop's exact JSON codec
-- (luaop.core.json), so code written for lua-cjson runs unchanged:
-- `require "cjson"` and `require "cjson.safe"` in scripts (an instance of
-- each per script, luaop.script) and in programs (luaop.main).
--
-- What differs from lua-cjson (docs/json.md): arrays decode marked with
-- luaop's array metatable, which is array_mt (and empty_array_mt), so []
-- stays []; integers stay exact to 64 bits; keys are written sorted and
-- floats with the fewest digits that read back exactly; JSON in and out is
-- strict (no NaN, Infinity, hex, comments), and the output compact.
--
-- Encoding tries the codec first. A value it refuses (a sparse array,
-- number keys, NaN, a function) and a setting it has no notion of go
-- through normalize(): a copy with lua-cjson's rules applied, encoded then.
local json = require("luaop.core").json

local M = {}

M.VERSION = "2.1.0 (luaop)"

local null, encode_json, decode_json = json.null, json.encode, json.decode
local ARRAY_MT = getmetatable(json.array())
local EMPTY_ARRAY = json.array() -- cjson.empty_array of programs' instances
local CORE_DEPTH = 10240 -- the codec's own limit (src/json.h)
local INT_MAX = 2147483647
local SKIP = {} -- what normalize() returns for a value to leave out

-- lua-cjson's defaults, but for decode_array_with_array_mt (on: [] stays
-- []) and decode_invalid_numbers (off: strict JSON only).
M.DEFAULTS = {
  encode_sparse_convert = false, encode_sparse_ratio = 2, encode_sparse_safe = 10,
  encode_max_depth = 1000, decode_max_depth = 1000, encode_number_precision = 14,
  encode_invalid_numbers = false, decode_invalid_numbers = false, encode_keep_buffer = true,
  encode_empty_table_as_object = true, decode_array_with_array_mt = true, encode_escape_forward_slash = true,
  encode_skip_unsupported_value_types = false, decode_allow_comment = false, encode_indent = "",
}

-- Errors carry no position, as lua-cjson's (raised from C) do.
local function argerror(i, fname, msg)
  error(("bad argument #%d to '%s' (%s)"):format(i, fname, msg), 0)
end

-- ---- settings -----------------------------------------------------------

-- true, false, "on" or "off"
local function boolean(v, i, fname)
  if type(v) == "boolean" then return v end
  if v == "on" or v == "off" then return v == "on" end
  if type(v) ~= "string" and type(v) ~= "number" then argerror(i, fname, "string expected, got " .. type(v)) end
  argerror(i, fname, ("invalid option '%s'"):format(v))
end

local function integer(v, i, fname, min, max)
  local n = math.tointeger(tonumber(v))
  if n == nil then
    if tonumber(v) then argerror(i, fname, "number has no integer representation") end
    argerror(i, fname, "number expected, got " .. type(v))
  end
  if n < min or n > max then argerror(i, fname, ("expected integer between %d and %d"):format(min, max)) end
  return n
end

-- lua-cjson built with DISABLE_INVALID_NUMBERS refuses them the same way:
-- luaop reads and writes valid JSON only.
local NO_INVALID = "Infinity, NaN, and/or hexadecimal numbers are not supported."

local function encode_invalid(v, i, fname)
  if v == "null" then return "null" end
  if boolean(v, i, fname) then error(NO_INVALID, 0) end
  return false
end

local function decode_invalid(v, i, fname)
  if boolean(v, i, fname) then error(NO_INVALID, 0) end
  return false
end

local function no_comments(v, i, fname)
  if boolean(v, i, fname) then error("comments are not JSON: luaop decodes strict JSON only", 0) end
  return false
end

local function compact(v, i, fname)
  if type(v) ~= "string" and type(v) ~= "number" then argerror(i, fname, "string expected, got " .. type(v)) end
  if v ~= "" then error("luaop's cjson writes compact JSON only: encode_indent takes \"\"", 0) end
  return ""
end

-- ---- depth ----------------------------------------------------------------

-- Where in the JSON text s the first array or object deeper than limit
-- opens (its position, 1-based), and that depth; nil when none does.
local function too_deep(s, limit)
  if #s < 2 * (limit + 1) then return nil end -- each level takes two bytes
  if select(2, s:gsub("[%[{]", "")) <= limit then return nil end
  local depth, i = 0, 1
  while true do
    local j, _, c = s:find('([%[%]{}"])', i)
    if not j then return nil end
    if c == '"' then -- to the closing quote, escapes skipped
      repeat
        j = s:find('["\\]', j + 1)
        if not j then return nil end
        local escape = s:byte(j) == 92
        if escape then j = j + 1 end
      until not escape
    elseif c == "[" or c == "{" then
      depth = depth + 1
      if depth > limit then return j, depth end
    else
      depth = depth - 1
    end
    i = j + 1
  end
end

-- ---- encode ---------------------------------------------------------------

local function number(cfg, n)
  if n == n and n ~= math.huge and n ~= -math.huge then return n end
  if cfg.encode_invalid_numbers == "null" then return null end
  error("Cannot serialise number: must not be NaN or Infinity", 0)
end

local normalize

-- The array part 1..n of t, holes as null, what is skipped left out.
local function array_part(cfg, t, n, depth)
  local out, m = json.array(), 0
  for i = 1, n do
    local x = rawget(t, i)
    if x == nil then x = null else x = normalize(cfg, x, depth) end
    if x ~= SKIP then
      m = m + 1
      out[m] = x
    end
  end
  return out
end

-- A copy of v the codec encodes as lua-cjson would encode v.
function normalize(cfg, v, depth)
  local kind = type(v)
  if kind == "number" then return number(cfg, v) end
  if kind == "string" or kind == "boolean" or kind == "nil" or v == null then return v end
  if kind ~= "table" then
    if cfg.encode_skip_unsupported_value_types then return SKIP end
    error(("Cannot serialise %s: type not supported"):format(kind), 0)
  end
  depth = depth + 1
  if depth > math.min(cfg.encode_max_depth, CORE_DEPTH) then
    error(("Cannot serialise, excessive nesting (%d)"):format(depth), 0)
  end
  -- array_mt and empty_array_mt (one metatable): the array part, as #t
  if getmetatable(v) == ARRAY_MT then return array_part(cfg, v, rawlen(v), depth) end
  local max, items, array = 0, 0, true
  for k in next, v do
    if math.type(k) ~= "integer" or k < 1 then
      array = false
      break
    end
    items = items + 1
    if k > max then max = k end
  end
  local ratio = cfg.encode_sparse_ratio
  if array and ratio > 0 and max > items * ratio and max > cfg.encode_sparse_safe then
    if not cfg.encode_sparse_convert then error("Cannot serialise table: excessively sparse array", 0) end
    array = false
  end
  if array and (max > 0 or not cfg.encode_empty_table_as_object) then return array_part(cfg, v, max, depth) end
  local out = {}
  for k, x in next, v do
    local kk = type(k)
    if kk == "number" then
      k = number(cfg, k)
      k = k == null and "null" or encode_json(k)
    elseif kk ~= "string" then
      error(("Cannot serialise %s: table key must be a number or string"):format(kk), 0)
    end
    x = normalize(cfg, x, depth)
    if x ~= SKIP then out[k] = x end
  end
  return out
end

local function encode(cfg, v)
  local ok, s = false, nil
  if cfg.encode_empty_table_as_object then ok, s = pcall(encode_json, v) end
  if not ok then
    v = normalize(cfg, v, 0)
    if v == SKIP then return "" end
    s = encode_json(v)
  end
  local _, depth = too_deep(s, math.min(cfg.encode_max_depth, CORE_DEPTH))
  if depth then error(("Cannot serialise, excessive nesting (%d)"):format(depth), 0) end
  if cfg.encode_escape_forward_slash then s = s:gsub("/", "\\/") end -- "/" is only ever in strings
  return s
end

-- ---- decode ---------------------------------------------------------------

-- the codec's message -> what lua-cjson expected there (and found, if fixed)
local EXPECTED = {
  ["unexpected end of input"] = { "value" },
  ["invalid literal"] = { "value", "invalid token" },
  ["invalid number"] = { "value" },
  ["leading zero in number"] = { "value", "invalid number" },
  ["unterminated string"] = { "value", "unexpected end of string" },
  ["expected ',' or ']' in array"] = { "comma or array end" },
  ["expected ',' or '}' in object"] = { "comma or object end" },
  ["expected a string key in object"] = { "object key string" },
  ["expected ':' after object key"] = { "colon" },
  ["trailing characters after JSON value"] = { "the end" },
}
local TOKENS = { ["{"] = "T_OBJ_BEGIN", ["}"] = "T_OBJ_END", ["["] = "T_ARR_BEGIN", ["]"] = "T_ARR_END",
  ['"'] = "T_STRING", [":"] = "T_COLON", [","] = "T_COMMA", [""] = "T_END", t = "T_BOOLEAN", f = "T_BOOLEAN",
  n = "T_NULL" }

-- The codec's "... at byte N" (0-based) as lua-cjson words it.
local function decode_error(cfg, s, err)
  local msg, at = err:match("^(.-) at byte (%d+)$")
  if not msg then return err end
  at = tonumber(at) + 1
  if msg:find("^nesting") then -- deeper than the codec goes: where lua-cjson's limit was passed
    local pos, depth = too_deep(s:sub(1, at), math.min(cfg.decode_max_depth, CORE_DEPTH))
    if pos then return ("Found too many nested data structures (%d) at character %d"):format(depth, pos) end
  end
  local e = EXPECTED[msg]
  if not e then return ("%s at character %d"):format(msg, at) end
  local c = s:sub(at, at)
  local found = e[2] or TOKENS[c]
  if not found then
    found = c:find("^[%d%-]") and (msg == "invalid number" and "invalid number" or "T_NUMBER") or "invalid token"
  end
  return ("Expected %s but found %s at character %d"):format(e[1], found, at)
end

-- Arrays as plain tables (decode_array_with_array_mt off).
local function unmark(v)
  if type(v) ~= "table" then return end
  if getmetatable(v) == ARRAY_MT then setmetatable(v, nil) end
  for _, x in next, v do unmark(x) end
end

local function decode(cfg, s, fname)
  if type(s) == "number" then s = tostring(s) end
  if type(s) ~= "string" then argerror(1, fname, "string expected, got " .. type(s)) end
  local v, err = decode_json(s)
  if v == nil then error(decode_error(cfg, s, err), 0) end
  local pos, depth = too_deep(s, math.min(cfg.decode_max_depth, CORE_DEPTH))
  if pos then error(("Found too many nested data structures (%d) at character %d"):format(depth, pos), 0) end
  if not cfg.decode_array_with_array_mt then unmark(v) end
  return v
end

-- ---- instances ------------------------------------------------------------

-- new([opts [, safe]]) -> a cjson module with settings of its own (what
-- cjson.new() gives). opts.array_mt: what it offers as array_mt and
-- empty_array_mt (a script's stand-in for luaop's array metatable),
-- opts.empty_array: its empty_array. safe: encode and decode return nil,
-- err instead of raising, as cjson.safe's.
function M.new(opts, safe)
  opts = opts or {}
  local cfg = {}
  for k, v in pairs(M.DEFAULTS) do cfg[k] = v end
  local prefix = safe and "cjson.safe." or "cjson."
  local cjson = {
    _NAME = safe and "cjson.safe" or "cjson", _VERSION = M.VERSION, null = null,
    array_mt = opts.array_mt or ARRAY_MT, empty_array_mt = opts.array_mt or ARRAY_MT,
    empty_array = opts.empty_array or EMPTY_ARRAY,
  }
  local function convert(name, f)
    local fname = prefix .. name
    cjson[name] = function(...)
      if select("#", ...) ~= 1 then argerror(1, fname, "expected 1 argument") end
      if not safe then return f(cfg, ..., fname) end
      local ok, r = pcall(f, cfg, ..., fname)
      if ok then return r end
      return nil, r
    end
  end
  convert("encode", encode)
  convert("decode", decode)
  -- setting([v]) -> the setting, after setting it to v unless v is nil
  local function setting(name, parse, ...)
    local fname, args = prefix .. name, table.pack(...)
    cjson[name] = function(...)
      if select("#", ...) > 1 then argerror(2, fname, "found too many arguments") end
      local v = ...
      if v ~= nil then cfg[name] = parse(v, 1, fname, table.unpack(args, 1, args.n)) end
      return cfg[name]
    end
  end
  setting("encode_max_depth", integer, 1, INT_MAX)
  setting("decode_max_depth", integer, 1, INT_MAX)
  setting("encode_number_precision", integer, 1, 16) -- kept, changes nothing: floats are always exact
  setting("encode_keep_buffer", boolean) -- kept, changes nothing: the codec keeps no buffer
  setting("encode_empty_table_as_object", boolean)
  setting("decode_array_with_array_mt", boolean)
  setting("encode_escape_forward_slash", boolean)
  setting("encode_skip_unsupported_value_types", boolean)
  setting("encode_invalid_numbers", encode_invalid)
  setting("decode_invalid_numbers", decode_invalid)
  setting("decode_allow_comment", no_comments)
  setting("encode_indent", compact)
  function cjson.encode_sparse_array(...)
    local fname = prefix .. "encode_sparse_array"
    if select("#", ...) > 3 then argerror(4, fname, "found too many arguments") end
    local convert_, ratio, safe_ = ...
    if convert_ ~= nil then cfg.encode_sparse_convert = boolean(convert_, 1, fname) end
    if ratio ~= nil then cfg.encode_sparse_ratio = integer(ratio, 2, fname, 0, INT_MAX) end
    if safe_ ~= nil then cfg.encode_sparse_safe = integer(safe_, 3, fname, 0, INT_MAX) end
    return cfg.encode_sparse_convert, cfg.encode_sparse_ratio, cfg.encode_sparse_safe
  end
  function cjson.new() return M.new(opts, safe) end
  return cjson
end

return M
