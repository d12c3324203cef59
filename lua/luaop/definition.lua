-- luaop.definition - a controller's definition: its validation, its
-- budgets (cut down to the command line's limits) and what reconcile may
-- return. luaop.controller is this module, with the manager added.
local core = require "luaop.core"

local M = {}

-- The budgets of one reconcile, unless a definition says otherwise:
-- `instructions = N` (the default is about a second of pure Lua) and
-- `memory = bytes` or a Kubernetes quantity such as "64Mi" (net growth of
-- the Lua heap while the reconcile runs).
M.DEFAULT_INSTRUCTIONS = 100000000
M.DEFAULT_MEMORY = 64 * 1024 * 1024
-- What a definition may declare at most (--max-instructions, --max-memory):
-- more is cut down to these, with a log line saying so.
M.MAX_INSTRUCTIONS = 1000000000
M.MAX_MEMORY = 1024 * 1024 * 1024

local UNITS = { [""] = 1, k = 1e3, M = 1e6, G = 1e9, Ki = 1 << 10, Mi = 1 << 20, Gi = 1 << 30 }

-- bytes from an integer or a quantity ("64Mi", "500M"); nil when malformed
local function bytes(v)
  if math.type(v) == "integer" then return v >= 1 and v or nil end
  if type(v) ~= "string" then return nil end
  local n, unit = v:match("^(%d+)(%a*)$")
  local mult = n and UNITS[unit]
  return mult and math.tointeger(tonumber(n) * mult) or nil
end

local Definition = {}
Definition.__index = Definition

local function check(def)
  if type(def) ~= "table" then error("a controller definition is a table", 0) end
  if type(def.name) ~= "string" or def.name == "" then error("a controller needs a name", 0) end
  if type(def.resource) ~= "string" then error(("controller %s needs a resource (the kind it reconciles)"):format(def.name), 0) end
  if type(def.reconcile) ~= "function" then error(("controller %s needs a reconcile function"):format(def.name), 0) end
  for _, k in ipairs(def.owns or {}) do
    if type(k) ~= "string" then error(("controller %s: owns lists kinds"):format(def.name), 0) end
  end
  for _, w in ipairs(def.watches or {}) do
    if type(w) ~= "table" or type(w[1]) ~= "string" or type(w.map) ~= "function" then
      error(("controller %s: each watch is { kind, map = function(obj) return requests end }"):format(def.name), 0)
    end
  end
  if def.instructions ~= nil and (math.type(def.instructions) ~= "integer" or def.instructions < 1) then
    error(("controller %s: instructions must be an integer >= 1"):format(def.name), 0)
  end
  if def.concurrency ~= nil and (math.type(def.concurrency) ~= "integer" or def.concurrency < 1) then
    error(("controller %s: concurrency must be an integer >= 1"):format(def.name), 0)
  end
  if def.memory ~= nil and not bytes(def.memory) then
    error(("controller %s: memory must be bytes (an integer >= 1) or a quantity such as \"64Mi\""):format(def.name), 0)
  end
  if def.resync ~= nil and (type(def.resync) ~= "number" or def.resync <= 0) then
    error(("controller %s: resync must be a number of seconds > 0"):format(def.name), 0)
  end
end

-- Validate and mark a definition. (Errors carry no position: the usual
-- `return luaop.controller {...}` is a tail call, which leaves no line of
-- the script to name; loading a script prefixes its path.)
local budgets = setmetatable({}, { __mode = "k" }) -- definition -> a reconcile's budgets

-- A budget a definition declares, cut down to the command line's limit.
local function capped(def, what, v, max, flag)
  if v <= max then return v end
  core.log.write("error", "controller", "a budget above the limit: using the limit", {
    controller = def.name, budget = what, declared = v, limit = max, flag = flag,
  })
  return max
end

function M.define(def)
  check(def)
  budgets[def] = {
    instructions = capped(def, "instructions", def.instructions or M.DEFAULT_INSTRUCTIONS, M.MAX_INSTRUCTIONS,
      "--max-instructions"),
    memory = capped(def, "memory", def.memory and bytes(def.memory) or M.DEFAULT_MEMORY, M.MAX_MEMORY, "--max-memory"),
  }
  return setmetatable(def, Definition)
end

function M.is_definition(v)
  return getmetatable(v) == Definition
end

function M.requeue_after(seconds)
  assert(type(seconds) == "number" and seconds >= 0, "requeue_after needs seconds >= 0")
  return { requeue_after = seconds }
end

function M.requeue()
  return { requeue = true }
end

local function kind_name(spec)
  return spec:match("([^/]+)$")
end

M.kind_name = kind_name

-- The budgets of one reconcile of def: {instructions =, memory =}.
function M.budgets(def)
  return budgets[def]
end

return M
