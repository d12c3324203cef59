-- luaop.script - operator scripts: where they are, and loading each in an
-- environment of its own (luaop.script.sandbox) under the load budget.
-- luaop.script.reload reloads them when their files change.
--
-- A source is what one --script names: a .lua file, or a directory whose
-- *.lua files (not hidden ones, not modules: NAME.lib.lua is the module
-- its scripts get with require "NAME", luaop.script.modules) are each a
-- script. Directories are watched the way the kubelet updates a ConfigMap
-- volume (the files are symlinks through ..data, which is swapped
-- atomically) and the way an editor saves (write in place, or write a new
-- file and rename it); a file source is watched through its directory.
--
-- A new version is loaded beside the old. If it does not load, raises at
-- its top level, or returns no valid definition, the old version keeps
-- serving and the error (file, line, message) is logged and counted.
local core = require "luaop.core"
local definition = require "luaop.definition"
local sandbox = require "luaop.script.sandbox"
local modules = require "luaop.script.modules"
local is_webhook = require("luaop.webhook.definition").is_webhook

local fs = core.fs
local M = {}

-- Budgets for a script's top level (it only defines controllers).
M.LOAD_BUDGET = { instructions = definition.DEFAULT_INSTRUCTIONS, memory = definition.DEFAULT_MEMORY }
-- ... and a time: a top level that waits (luaop.sleep) would hold up the
-- load, and with it luaop's start or `--check`
M.LOAD_TIMEOUT = 10

-- sources(paths) -> { {path, dir = bool} } | nil, err
function M.sources(paths)
  local out = {}
  for _, p in ipairs(paths) do
    local kind, err = fs.kind(p)
    if not kind then return nil, "cannot read script " .. err end
    if kind ~= "file" and kind ~= "directory" then
      return nil, ("script %s is neither a file nor a directory"):format(p)
    end
    if kind == "file" and modules.is_module(p:match("[^/]*$")) then
      return nil, ("script %s is a module (NAME%s), which the scripts beside it require: name a script, or "
        .. "the directory"):format(p, modules.SUFFIX)
    end
    out[#out + 1] = { path = (p:gsub("(.)/+$", "%1")), dir = kind == "directory" }
  end
  return out
end

-- The script files the sources hold now, sorted; nil, err when a directory
-- cannot be read (then nothing is to be taken for removed).
function M.files(sources)
  local out, seen = {}, {}
  for _, s in ipairs(sources) do
    if s.dir then
      local names, err = fs.list(s.path)
      if not names then return nil, err end
      for _, name in ipairs(names) do
        local path = s.path .. "/" .. name
        if name:match("%.lua$") and not name:match("^%.") and not modules.is_module(name) and not seen[path]
          and fs.kind(path) == "file" then
          seen[path] = true
          out[#out + 1] = path
        end
      end
    elseif not seen[s.path] and fs.kind(s.path) == "file" then
      seen[s.path] = true
      out[#out + 1] = s.path
    end
  end
  table.sort(out)
  return out
end

M.read = fs.read

-- Compiled scripts by path and text, as string.dump writes them, when
-- kept (nil: none is; the test kit keeps them, its specs loading the same
-- few scripts for every test). Each compile still makes a fresh chunk in a
-- fresh sandbox.
M.compiled = nil

-- A chunk of text in env (a script's or a module's).
local function chunk_of(path, text, env)
  local kept, key = M.compiled, nil
  if kept then
    key = path .. "\0" .. text
    if kept[key] then return load(kept[key], "@" .. path, "b", env) end
  end
  local chunk, err = load(text, "@" .. path, "t", env)
  if chunk and kept then kept[key] = string.dump(chunk) end
  return chunk, err
end

-- compile(path, text) -> chunk | nil, "path:line: message"; and, either
-- way, the modules it uses (luaop.script.modules: path -> text, filled in
-- as it requires them)
function M.compile(path, text)
  local env = sandbox.env(path)
  local used = modules.attach(env, path, chunk_of)
  local chunk, err = chunk_of(path, text, env)
  return chunk, err, used
end

-- The definitions a script's results hold (controllers' and webhooks'):
-- one, or a list.
function M.definitions(v)
  if definition.is_definition(v) or is_webhook(v) then return { v } end
  if type(v) == "table" and #v > 0 then
    for _, d in ipairs(v) do
      if not definition.is_definition(d) and not is_webhook(d) then return nil end
    end
    return v
  end
  return nil
end

-- An error from a script's top level, with the script's path in front
-- unless it names it already.
function M.located(path, err)
  err = tostring(err)
  if err:sub(1, #path + 1) == path .. ":" then return err end
  return path .. ": " .. err
end

-- An error of a definition names the line of its reconcile
-- (luaop.definition) and the field it is about ("controller x: concurrency
-- must be ..."): name the field's line instead, the nearest line where a
-- table constructor of the chunk sets it (core.check.fields), else the
-- nearest line of text that sets it.
local function field_line(err, path, text, chunk)
  local at = "^" .. path:gsub("%p", "%%%0") .. ":(%d+): "
  local line, field = err:match(at .. "controller [^:]*: (%l+)")
  if not line then line, field = err:match(at .. "webhook%.%l+: (%l+)") end -- (luaop.webhook.definition)
  if not line then return err end
  line = tonumber(line)
  local best, n = nil, 0
  local function near(l) return not best or math.abs(l - line) < math.abs(best - line) end
  for _, f in ipairs(core.check.fields(chunk)) do
    if f.name == field and near(f.line) then best = f.line end
  end
  for l in (best and "" or text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if l:find("%f[%w_]" .. field .. "%s*=") and near(n) then best = n end
  end
  if not best then return err end
  return ("%s:%d:%s"):format(path, best, err:sub(#path + #tostring(line) + 3))
end

-- The most tasks one version of a script may have live at once (its top
-- level's, its reconciles' and every task they spawn): --max-tasks.
M.MAX_TASKS = 1000

-- What one version of a script's tasks count against: core.task.owner.
function M.owner()
  return core.task.owner(M.MAX_TASKS)
end

-- Load and run a script's top level in a budgeted task: defs | nil, err;
-- and the modules it used (luaop.script.modules), either way.
-- owner: what its tasks count against (M.owner(); a new one by default),
-- to hand to Manager:set with the definitions. A load that fails stops it.
function M.load(path, text, owner)
  local chunk, err, used = M.compile(path, text)
  if not chunk then return nil, err, used end
  owner = owner or M.owner()
  -- the command line's limits cap the top level's budget too
  local task = core.task.spawn_limited({
    instructions = math.min(M.LOAD_BUDGET.instructions, definition.MAX_INSTRUCTIONS),
    memory = math.min(M.LOAD_BUDGET.memory, definition.MAX_MEMORY),
    name = "load " .. path, owner = owner }, chunk)
  local out, finished = nil, core.task.cond()
  core.task.spawn(function()
    out = table.pack(task:wait())
    finished:signal()
  end)
  if not out and not finished:wait(M.LOAD_TIMEOUT) then
    owner:stop() -- (the top level's task among them)
    return nil, ("%s: its top level did not finish within %g s: it waits, and a top level only defines controllers")
      :format(path, M.LOAD_TIMEOUT), used
  end
  local ok, res = out[1], out[2]
  if not ok then
    owner:stop()
    return nil, field_line(M.located(path, res), path, text, chunk), used
  end
  local defs = M.definitions(res)
  if not defs then
    owner:stop()
    return nil, path .. ": the script returns no controller definition (return luaop.controller{...} or a list "
      .. "of them)", used
  end
  return defs, owner, used
end

-- Compile every script the paths hold, running none (before luaop connects
-- to an API server: a script's own error comes first). 0, or 1 after
-- logging each one that does not compile, with its file and line.
-- (A path that cannot be read is left to the run, which says so.)
function M.precheck(paths)
  local sources = M.sources(paths)
  local failures = {}
  for _, path in ipairs(sources and M.files(sources) or {}) do
    local text = M.read(path)
    local chunk, cerr = M.compile(path, text or "")
    if not chunk then failures[#failures + 1] = cerr end
  end
  if #failures == 0 then return 0 end
  core.log.write("error", "script", "cannot load scripts", { error = table.concat(failures, "\n") })
  return 1
end

return M
