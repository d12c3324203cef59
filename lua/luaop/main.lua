-- luaop.main - how `luaop --script PATH...` runs its scripts.
--
-- One script file that returns no controller definition is a program: it
-- runs top to bottom (with the arguments after --) and its return value is
-- the exit status. Otherwise every script must return controller
-- definitions; luaop runs them until SIGTERM or SIGINT, reloading a script
-- when its file changes.
local core = require "luaop.core"
local controller = require "luaop.controller"
local script = require "luaop.script"

-- options: scripts (the --script paths), graceful_shutdown_timeout (s).
return function(options, ...)
  local paths = options.scripts
  local sources, err = script.sources(paths)
  if not sources then error(err, 0) end
  local manager = controller.manager()
  local reloader = script.reloader(sources, manager)

  if #sources == 1 and not sources[1].dir then
    local path = sources[1].path
    local text, rerr = script.read(path)
    if not text then error("cannot read script " .. tostring(rerr), 0) end
    local chunk, cerr = script.compile(path, text)
    if not chunk then error("cannot load script " .. cerr, 0) end
    local results = table.pack(xpcall(chunk, function(e)
      return script.located(path, core.traceback(tostring(e), 2))
    end, ...))
    if not results[1] then
      core.log.write("error", "script", "script failed", { error = results[2] })
      return 1
    end
    table.remove(results, 1)
    results.n = results.n - 1
    local defs = script.definitions(results[1])
    if not defs then return table.unpack(results, 1, results.n) end -- a program
    local ok, serr = manager:set(path, defs)
    if not ok then error(serr, 0) end
    reloader.loaded[path] = { text = text }
  else
    local ok, lerr = reloader:scan(true)
    if not ok then error("cannot load scripts:\n" .. lerr, 0) end
    if next(reloader.loaded) == nil then
      reloader.log:info("no scripts yet: waiting for *.lua files", { scripts = table.concat(paths, ",") })
    end
  end
  reloader:watch()
  local drained = manager:run_until_shutdown(options.graceful_shutdown_timeout)
  reloader:stop()
  if not drained then return 1 end
end
