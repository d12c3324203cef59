-- luaop.main - how luaop runs what it is given.
--
-- --script PATH...: every script (a file, or each *.lua of a directory)
-- returns controller definitions; each loads in a sandboxed environment of
-- its own under the load budget (luaop.script), and luaop runs the
-- controllers until SIGTERM or SIGINT, reloading a script when its file
-- changes.
--
-- --check PATH...: each script checked with no cluster (luaop.check).
--
-- --program FILE: trusted local Lua (tools, benchmarks, specs) runs top to
-- bottom with the whole standard library and the arguments after --; its
-- return value is the exit status, unless it returns controller
-- definitions, which then run until SIGTERM or SIGINT (not reloaded).
local core = require "luaop.core"
local definition = require "luaop.definition"
local events = require "luaop.events"
local manager_mod = require "luaop.manager"
local script = require "luaop.script"
local reload = require "luaop.script.reload"

local function run_program(path, ...)
  -- lua-cjson's interface over luaop's codec (luaop.cjson)
  package.preload.cjson = function() return require("luaop.cjson").new() end
  package.preload["cjson.safe"] = function() return require("luaop.cjson").new(nil, true) end
  local text, rerr = script.read(path)
  if not text then error("cannot read program " .. tostring(rerr), 0) end
  local chunk, cerr = load(text, "@" .. path, "t")
  if not chunk then error("cannot load program " .. cerr, 0) end
  local results = table.pack(xpcall(chunk, function(e)
    return script.located(path, core.traceback(tostring(e), 2))
  end, ...))
  if not results[1] then
    core.log.write("error", "script", "program failed", { error = results[2] })
    return false, 1
  end
  local defs = script.definitions(results[2])
  if not defs then return false, table.unpack(results, 2, results.n) end
  return true, defs
end

-- options: scripts (the --script paths) or program,
-- graceful_shutdown_timeout (seconds), leader (leader election:
-- namespace, name, identity, lease_duration, renew_deadline, retry_period),
-- shard (sharding: ring, namespace, identity and the same durations),
-- webhook (luaop.webhook.server's) and metrics_secure ({address, cert,
-- key}: luaop.metrics_secure), as src/main.c makes them from the flags.
return function(options, ...)
  -- (luaop.check and luaop.leader are loaded only for a run that asks for
  -- them: every other run keeps their code and tables off its idle heap)
  if options.check then return require("luaop.check").run(options.scripts, options.crds) end
  definition.MAX_INSTRUCTIONS = options.max_instructions or definition.MAX_INSTRUCTIONS
  definition.MAX_MEMORY = options.max_memory or definition.MAX_MEMORY
  script.MAX_TASKS = options.max_tasks or script.MAX_TASKS
  local manager = manager_mod.new()
  manager.webhook_start = require("luaop.webhook.server").starter(options) -- (the first webhook starts it)
  if options.leader then manager.elector = require("luaop.leader").new(options.leader) end
  if options.shard then manager.shard = require("luaop.shard").new(manager, options.shard) end
  -- --metrics-secure: /metrics over HTTPS, stopped after the drain (controller-runtime stops
  -- its metrics server last)
  local metrics_server = options.metrics_secure
    and require("luaop.metrics_secure").start(options.metrics_secure, manager.client)
  events.set_identity(options.identity)
  local reloader
  if options.program then
    local controllers, defs = run_program(options.program, ...)
    if not controllers then return defs end -- a program's exit status
    local ok, serr = manager:set(options.program, defs)
    if not ok then error(serr, 0) end
  else
    local sources, err = script.sources(options.scripts)
    if not sources then error(err, 0) end
    reloader = reload.reloader(sources, manager)
    local ok, lerr = reloader:scan(true)
    if not ok then error("cannot load scripts:\n" .. lerr, 0) end
    if next(reloader.loaded) == nil then
      reloader.log:info("no scripts yet: waiting for *.lua files", { scripts = table.concat(options.scripts, ",") })
    end
    reloader:watch()
  end
  local drained, status = manager:run_until_shutdown(options.graceful_shutdown_timeout)
  if reloader then reloader:stop() end
  if metrics_server then metrics_server.stop() end
  if not drained then return status or 1 end
end
