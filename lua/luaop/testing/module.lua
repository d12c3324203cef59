-- luaop.testing.module - testing.module(path): a module (NAME.lib.lua) for
-- a spec to call its functions directly, as a Go package's tests call its
-- functions. A spec's own require does not find NAME.lib.lua (only the
-- scripts' sandboxed require does), so this loads it as a script beside it
-- gets it with require "NAME" (luaop.script.modules): sandboxed, globals
-- of its own, the modules it requires found beside it. Each call is a new
-- instance (its top level run again), as each script has its own.
local core = require "luaop.core"
local script = require "luaop.script"
local modules = require "luaop.script.modules"
local paths = require "luaop.testing.paths"

local M = {}

local USAGE = "testing.module(path)"

-- The module at path (found as testing.env's paths are: beside the spec,
-- then in the working directory): what its file returns (true when
-- nothing). Raises at the spec's line when path is no module's file, or
-- the module does not compile or raises at its top level.
function M.load(path)
  if type(path) ~= "string" then
    error(("%s: path must be a string, a NAME.lib.lua file, got %s"):format(USAGE, type(path)), 2)
  end
  local name = modules.name_of(path:match("[^/]*$"))
  if not name then
    error(("%s: %s is not a module's file: NAME.lib.lua, NAME of lowercase letters, digits and _"):format(USAGE,
      path), 2)
  end
  local file = paths.resolve(path)
  local dir = file:match("^(.*)/[^/]*$") or "."
  -- a script beside it that requires it, run in a task (a module's file
  -- is read only where code may wait), the loop run until it is done
  local chunk = assert(script.compile(dir .. "/" .. name .. "_module.lua", ("return require %q"):format(name)))
  local res
  core.task.spawn(function() res = table.pack(pcall(chunk)) end)
  core.kit.run()
  if not res then error(("%s: the module %s waits at its top level"):format(USAGE, path), 2) end
  if not res[1] then error((tostring(res[2]):gsub("^[^:]*_module%.lua:%d+: ", "")), 2) end
  return res[2]
end

return M
