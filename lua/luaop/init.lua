-- luaop - what an operator script requires: the client, JSON helpers,
-- tasks, controllers, time and logging. Only a face: each part lives in a
-- module of its own (luaop.client, luaop.definition, luaop.object,
-- luaop.time, luaop.logging), which luaop's own modules require directly.
local core = require "luaop.core"
local client = require "luaop.client"
local definition = require "luaop.definition"
local logging = require "luaop.logging"
local object = require "luaop.object"

local luaop = {
  version = core.version,
  json = core.json,
  -- the SHA-256 of a JSON-able value's canonical JSON text (64 hex digits)
  hash = core.json.hash,
  null = core.json.null, -- JSON null, distinct from an absent field (nil)
  array = core.json.array, -- mark a table as a JSON array (so {} encodes as [])
  sleep = core.task.sleep, -- yields the task
  spawn = core.task.spawn, -- run a function as a task of its own; :wait() for it
  is_error = client.is_error,
  -- a deep copy of a decoded object; its controller reference; make owner its controller
  copy = object.copy,
  controller_of = object.controller_of,
  set_controller = object.set_controller,
  -- a controller definition: return it from the script (or a list of them)
  controller = definition.define,
  -- webhook definitions, returned beside controllers: .validating, .mutating, .conversion
  webhook = require("luaop.webhook.definition").face,
  -- what reconcile returns to be called again: after `seconds`, or with backoff
  requeue_after = definition.requeue_after,
  requeue = definition.requeue,
  -- an error reconcile raises or returns that is not retried
  terminal = require("luaop.retry").terminal,
  -- RFC 3339 times and the two clocks
  time = require "luaop.time",
  conditions = require "luaop.conditions", -- status.conditions as apimachinery's meta.SetStatusCondition keeps them
  -- counters, gauges and histograms of the script's own, in /metrics (each script's is its own: script/sandbox.lua)
  metrics = require("luaop.metrics").face(),
  -- a logger: log:info(msg, {k = v}), :error, :debug; :with{k = v}
  logger = logging.logger,
  log = logging.logger("script"),
}

-- The client of the API server luaop was started against.
function luaop.client(opts)
  if opts then return client.new(opts) end
  return client.default()
end

return luaop
