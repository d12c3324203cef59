-- luaop.testing.checks - the kit refuses what it would otherwise ignore:
-- an unknown option of testing.env, an unknown key of env:actions' filter
-- or env:fail's rule (with the closest known one), a verb or a reason no
-- request has, a value of the wrong type; each raised at the spec's line
-- (luaop.testing.guard's where). And core.log.write as the kit replaces
-- it refuses exactly what luaop's C one refuses, with its errors.
local core = require "luaop.core"
local guard = require "luaop.testing.guard"
local apiserver = require "luaop.testing.apiserver"

local M = {}

local function fail(msg) error(guard.where() .. msg, 0) end

-- The edits from a to b (a transposition is one: "pacth"), or math.huge
-- past `most`.
local function distance(a, b, most)
  if math.abs(#a - #b) > most then return math.huge end
  local prev2, prev = nil, {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur, low = { [0] = i }, i
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
      if prev2 and i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        cur[j] = math.min(cur[j], prev2[j - 2] + 1)
      end
      if cur[j] < low then low = cur[j] end
    end
    if low > most then return math.huge end
    prev2, prev = prev, cur
  end
  return prev[#b]
end

-- ' (did you mean "x"?)' for the known name nearest to name (at most 2
-- edits, and a third of its length), or "".
local function suggest(name, known)
  local best, d = nil, math.huge
  local most = math.min(2, math.max(1, #name // 3))
  for _, k in ipairs(known) do
    local n = distance(name:lower(), k:lower(), most)
    if n < d or (n == d and best and k < best) then best, d = k, n end
  end
  return best and (' (did you mean "%s"?)'):format(best) or ""
end
M.suggest = suggest

local function sorted_keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- Types: a table of key -> one of "string", "number", "table", "boolean",
-- "integer>=0", "number>=0", "strings" (a string or a list of strings),
-- "any" (each value checked by its user).
local function is(v, want)
  if want == "any" then return true end
  if want == "integer>=0" then return math.type(v) == "integer" and v >= 0 end
  if want == "number>=0" then return type(v) == "number" and v >= 0 and v == v end
  if want == "strings" then
    if type(v) == "string" then return true end
    if type(v) ~= "table" then return false end
    for _, s in ipairs(v) do if type(s) ~= "string" then return false end end
    return true
  end
  local a, b = want:match("^(%a+)|(%a+)$")
  if a then return type(v) == a or type(v) == b end
  return type(v) == want
end

local WANTS = {
  ["integer>=0"] = "an integer >= 0", ["number>=0"] = "a number >= 0", strings = "a string or a list of strings",
  ["string|number"] = "a string or a number", ["string|table"] = "a string or a table",
}

-- Raise at the spec's line when t (what: "testing.env", ...) has a key
-- not in `known` (key -> type) or a value not of its type.
function M.keys(t, known, what)
  if t == nil then return end
  if type(t) ~= "table" then fail(("%s needs a table, got %s"):format(what, type(t))) end
  local names = sorted_keys(known)
  for k, v in pairs(t) do
    local want = known[k]
    if want == nil then
      fail(("%s: unknown %s %s%s; it knows %s"):format(what, type(k) == "string" and "key" or "index",
        type(k) == "string" and ('"%s"'):format(k) or tostring(k), type(k) == "string" and suggest(k, names) or "",
        table.concat(names, ", ")))
    end
    if not is(v, want) then
      fail(("%s: %s must be %s, got %s"):format(what, k, WANTS[want] or "a " .. want,
        type(v) == "string" and ('"%s"'):format(v) or type(v)))
    end
  end
end

M.ENV = {
  script = "string", scripts = "strings", manifests = "strings", objects = "table", time = "string|number",
  namespace = "string", deadline = "number>=0", max_reconciles = "integer>=0",
}

-- The verbs a request has (the action log's).
M.VERBS = { "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection" }
local verbs = {}
for _, v in ipairs(M.VERBS) do verbs[v] = true end

function M.verb(v, what)
  if v ~= nil and not verbs[v] then
    fail(('%s: unknown verb %s%s; the verbs are %s'):format(what, type(v) == "string" and ('"%s"'):format(v)
      or type(v), type(v) == "string" and suggest(v, M.VERBS) or "", table.concat(M.VERBS, ", ")))
  end
end

-- An action's fields (luaop.testing.apiserver's log), and reads.
M.ACTION = {
  verb = "string", kind = "string", resource = "string", group = "string", version = "string",
  namespace = "string", name = "string", subresource = "string", object = "table", patch = "table",
  patch_type = "string", options = "table", label_selector = "string", field_selector = "string",
  resource_version = "string", injected = "boolean", dry_run = "boolean", field_manager = "string",
  seq = "number", reads = "boolean",
}

-- env:fail's rule.
M.RULE = {
  verb = "string", kind = "string", resource = "string", group = "string", namespace = "string",
  name = "string", subresource = "string", reason = "string", code = "integer>=0", message = "string",
  details = "table", times = "integer>=0", test = "boolean",
}

function M.reason(r, what)
  if r ~= nil and not apiserver.REASON_CODES[r] then
    local known = sorted_keys(apiserver.REASON_CODES)
    fail(('%s: unknown reason "%s"%s; the reasons are %s'):format(what, r, suggest(r, known),
      table.concat(known, ", ")))
  end
end

-- core.log.write as the kit replaces it: the C one's checks and its
-- errors (luaL's, at the line of the write's caller), before the line is
-- kept. The fields are checked whatever the level (the C one checks them
-- when the level is written: a cluster at debug level would refuse them).
-- n: how many arguments the write had.
local function raise(msg)
  local info = debug.getinfo(4, "Sl") -- (raise, log_args, the kit's write, its caller)
  local where = info and info.currentline > 0 and ("%s:%d: "):format(info.short_src, info.currentline) or ""
  error(where .. msg, 0)
end
local function typename(v)
  local mt = getmetatable(v)
  if type(mt) == "table" and type(rawget(mt, "__name")) == "string" then return rawget(mt, "__name") end
  return type(v)
end
local function type_error(i, want, v, none)
  return ("bad argument #%d to 'write' (%s expected, got %s)"):format(i, want, none and "no value" or typename(v))
end
local function is_text(v) return type(v) == "string" or type(v) == "number" end

function M.log_args(n, level, logger, msg, fields)
  if math.type(level) ~= "integer" then
    if not is_text(level) then raise(type_error(1, "string", level, n < 1)) end
    if not pcall(core.log.enabled, level) then
      raise("bad argument #1 to 'write' (level must be error, info, debug, trace or a number)")
    end
  end
  if logger ~= nil and not is_text(logger) then raise(type_error(2, "string", logger)) end
  if not is_text(msg) then raise(type_error(3, "string", msg, n < 3)) end
  if fields ~= nil then
    if type(fields) ~= "table" then raise(type_error(4, "table", fields)) end
    for k in next, fields do
      if type(k) ~= "string" then raise("log field keys must be strings") end
    end
  end
end

return M
