-- luaop - what an operator script requires: the client, JSON helpers,
-- tasks, and logging.
local core = require "luaop.core"
local client = require "luaop.client"

local luaop = {
  version = core.version,
  json = core.json,
  null = core.json.null, -- JSON null, distinct from an absent field (nil)
  array = core.json.array, -- mark a table as a JSON array (so {} encodes as [])
  sleep = core.task.sleep, -- yields the task
  spawn = core.task.spawn, -- run a function as a task of its own; :wait() for it
  now = core.task.now,
  is_error = client.is_error,
}

-- A controller definition (see luaop.controller): return it from the script
-- (or a list of them) and luaop runs it.
function luaop.controller(def)
  return require("luaop.controller").define(def)
end

-- What reconcile returns to be called again: after `seconds`, or with backoff.
function luaop.requeue_after(seconds)
  return require("luaop.controller").requeue_after(seconds)
end

function luaop.requeue()
  return require("luaop.controller").requeue()
end

-- The client of the API server luaop was started against.
function luaop.client(opts)
  if opts then return client.new(opts) end
  return client.default()
end

-- A logger: log:info(msg, {k = v}), :error, :debug; :with{k = v} adds values.
local Logger = {}
Logger.__index = Logger

local function merge(a, b)
  if not b then return a end
  local out = {}
  for k, v in pairs(a) do out[k] = v end
  for k, v in pairs(b) do out[k] = v end
  return out
end

function Logger:info(msg, kv) core.log.write("info", self.name, msg, merge(self.values, kv)) end
function Logger:error(msg, kv) core.log.write("error", self.name, msg, merge(self.values, kv)) end
function Logger:debug(msg, kv) core.log.write("debug", self.name, msg, merge(self.values, kv)) end
function Logger:with(kv) return setmetatable({ name = self.name, values = merge(self.values, kv) }, Logger) end

function luaop.logger(name)
  return setmetatable({ name = name or "script", values = {} }, Logger)
end

luaop.log = luaop.logger("script")

return luaop
