-- luaop.webhook.definition - webhook definitions a script returns beside
-- (or instead of) its controllers: luaop.webhook.validating{...},
-- luaop.webhook.mutating{...} and luaop.webhook.conversion{...}. Each is
-- validated as a controller's definition is (a problem raises at its
-- field's line; luaop --check collects them all), and names the path it is
-- served at, as kubebuilder makes them:
--   /validate-<group, dots as dashes>-<version>-<kind lowercased>
--   /mutate-<group, dots as dashes>-<version>-<kind lowercased>
--   /convert                  (every conversion, told apart by group and kind)
local core = require "luaop.core"
local definition = require "luaop.definition"

local M = {}

-- A handler's wall deadline unless its definition says `timeout =`: the API
-- server waits timeoutSeconds (10 by default) for the answer; one after it
-- is no answer at all, and its failurePolicy decides without a word of why.
M.DEFAULT_TIMEOUT = 5
M.MAX_TIMEOUT = 30 -- (timeoutSeconds' own limit)

M.KINDS = { "validating", "mutating", "conversion" }
local HANDLER = { validating = "validate", mutating = "mutate", conversion = "convert" }
M.HANDLER = HANDLER

M.FIELDS = {
  validating = { "resource", "validate", "path", "timeout", "instructions", "memory" },
  mutating = { "resource", "mutate", "path", "timeout", "instructions", "memory" },
  conversion = { "resource", "convert", "timeout", "instructions", "memory" },
}

local Webhook = {} -- the metatable that marks a webhook definition

function M.is_webhook(v)
  return getmetatable(v) == Webhook
end

-- group, version, kind of "group/version/Kind" or "version/Kind" (the core
-- group); nil, why for anything else.
local function gvk(resource)
  local bad = definition.bad_kind(resource)
  if bad then return nil, bad end
  local parts = {}
  for p in (resource .. "/"):gmatch("([^/]*)/") do parts[#parts + 1] = p end
  if #parts < 2 then return nil, "name its version too: group/version/Kind (or v1/Kind for the core group)" end
  return #parts == 3 and parts[1] or "", parts[#parts - 1], parts[#parts]
end

-- The path kubebuilder gives an admission webhook (controller-runtime's
-- generateValidatePath / generateMutatePath).
function M.path_of(kind, group, version, k)
  return ("/%s-%s-%s-%s"):format(kind == "validating" and "validate" or "mutate", group:gsub("%.", "-"), version,
    k:lower())
end

-- Everything wrong with def as a `kind` webhook: { {field =, message =,
-- unknown = true}, ... }, in the order of its fields.
function M.problems(kind, def)
  local label = "webhook." .. kind
  if type(def) ~= "table" then return { { message = label .. ": a webhook definition is a table" } } end
  local out = {}
  local function fail(field, fmt, ...) out[#out + 1] = { field = field, message = label .. ": " .. fmt:format(...) } end
  if type(def.resource) ~= "string" then
    fail("resource", kind == "conversion" and "needs a resource: group/Kind (conversion is between all its versions)"
      or "needs a resource: group/version/Kind (v1/Kind for the core group)")
  elseif kind == "conversion" then
    local group, k = def.resource:match("^([^/]+)/([^/]+)$")
    local bad = not group and "name it group/Kind, such as \"example.com/At\" (a conversion is between all the "
      .. "kind's versions)" or definition.bad_kind(group .. "/v1/" .. k)
    if not bad and not group:find("%.") then bad = "a custom resource's group has a dot (example.com)" end
    if bad then fail("resource", "resource %q: %s", def.resource, bad) end
  else
    local g, why = gvk(def.resource)
    if not g then fail("resource", "resource %q: %s", def.resource, why) end
  end
  local h = HANDLER[kind]
  if type(def[h]) ~= "function" then
    fail(h, "needs %s = function(%s) ... end", h, kind == "validating" and "req, res" or kind == "mutating"
      and "obj, req, res" or "obj, version")
  end
  if def.path ~= nil and (type(def.path) ~= "string" or not def.path:match("^/[%w%-%._~/]*$") or def.path == "/") then
    fail("path", "path must be a URL path such as \"/validate-example-com-v1-at\", got %s", definition.shown(def.path))
  end
  local t = def.timeout
  if t ~= nil and (type(t) ~= "number" or not (t > 0 and t <= M.MAX_TIMEOUT)) then
    fail("timeout", "timeout must be seconds, more than 0 and at most %d (keep it under the configuration's "
      .. "timeoutSeconds, 10 by default), got %s", M.MAX_TIMEOUT, definition.shown(def.timeout))
  end
  if def.instructions ~= nil and (math.type(def.instructions) ~= "integer" or def.instructions < 1) then
    fail("instructions", "instructions must be an integer >= 1")
  end
  if def.memory ~= nil and not (math.type(def.memory) == "integer" and def.memory >= 1 or core.bytes(def.memory)) then
    fail("memory", "memory must be bytes (an integer >= 1) or a quantity such as \"64Mi\"")
  end
  local known, keys = {}, {}
  for _, f in ipairs(M.FIELDS[kind]) do known[f] = true end
  for k in pairs(def) do
    if not known[k] then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local near = type(k) == "string" and definition.nearest(k, M.FIELDS[kind])
    out[#out + 1] = { field = k, unknown = true, message = ("%s: unknown field %s%s"):format(label, tostring(k),
      near and (" (did you mean %s?)"):format(near) or "") }
  end
  return out
end

-- What a loaded definition serves: its path, the handler's budgets, and
-- for conversion its group and kind.
local function settle(kind, def)
  local w = { kind = kind, def = def, handler = def[HANDLER[kind]],
    timeout = def.timeout or M.DEFAULT_TIMEOUT,
    instructions = math.min(def.instructions or definition.DEFAULT_INSTRUCTIONS, definition.MAX_INSTRUCTIONS),
    memory = math.min(def.memory and (math.type(def.memory) == "integer" and def.memory or core.bytes(def.memory))
      or definition.DEFAULT_MEMORY, definition.MAX_MEMORY) }
  if kind == "conversion" then
    w.group, w.resource_kind = def.resource:match("^([^/]+)/([^/]+)$")
    w.path = "/convert"
  else
    w.group, w.version, w.resource_kind = gvk(def.resource)
    w.path = def.path or M.path_of(kind, w.group, w.version, w.resource_kind)
  end
  return w
end

local served = setmetatable({}, { __mode = "k" }) -- definition -> what it serves

-- What a webhook definition serves: {kind, path, handler, timeout,
-- instructions, memory, group, version, resource_kind}.
function M.served(def)
  return served[def]
end

-- Validate and mark def as a `kind` webhook (raising at the line of the
-- field at fault, as luaop.definition does for controllers; an unknown
-- field is logged, not refused). level: the caller's stack level.
function M.define(kind, def, level)
  local problems = M.problems(kind, def)
  if definition.collect then -- (luaop --check)
    definition.collect(def, problems)
    if type(def) ~= "table" then return def end
    if #problems > 0 then return setmetatable(def, Webhook) end
  end
  local at = #problems > 0 and type(def) == "table" and definition.problem_lines(def, problems, level) or {}
  -- (none found: the line of its handler, which luaop.script moves to the field's)
  local handler = type(def) == "table" and def[HANDLER[kind]]
  local ok, line, source = pcall(core.check.line, type(handler) == "function" and handler or nil)
  for _, p in ipairs(problems) do
    if (at[p] or "") == "" and ok and type(source) == "string" and source:sub(1, 1) == "@" then
      at[p] = ("%s:%d"):format(source:sub(2), line)
    end
  end
  definition.report(def, problems, at, "webhook")
  setmetatable(def, Webhook)
  served[def] = settle(kind, def)
  return def
end

-- The face scripts get: luaop.webhook.validating{...} and its like.
M.face = {}
for _, kind in ipairs(M.KINDS) do
  M.face[kind] = function(def) return M.define(kind, def, 2) end
end

return M
