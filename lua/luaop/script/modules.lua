-- luaop.script.modules - modules scripts share: a file NAME.lib.lua beside
-- a script (in its directory) is the module a script of that directory
-- gets with require "NAME". It is never a script itself (luaop.script
-- leaves it out of a directory's scripts).
--
-- Each script has its own instance of every module it requires: a module
-- runs in an environment made as a script's is (the sandbox's allowlist,
-- fresh globals of its own; require, luaop, cjson and math's generator the
-- requiring script's), under the budget of the code that requires it, and
-- at most once per script (require caches what it returned, as Lua's does).
-- A module may require other modules; a cycle raises.
--
-- What a script's modules were when it loaded is kept (used: path -> text,
-- false for a module it asked for that was missing), so that
-- luaop.script.reload reloads the script when one of them changes.
local core = require "luaop.core"
local definition = require "luaop.definition"
local sandboxed = require "luaop.sandbox"

local fs = core.fs
local M = {}

M.SUFFIX = ".lib.lua"
M.NAME = "^[a-z0-9_]+$" -- a module's name: lowercase letters, digits and _

-- What the sandbox's require hands out itself (a file cannot take their
-- names: require gives these).
M.BUILTIN = { "luaop", "cjson", "cjson.safe", "string", "table", "math", "utf8", "coroutine", "os" }

-- The files are read through these (the test kit's may be set to read at
-- once).
M.read, M.list = fs.read, fs.list

-- Whether a file name (no directory) is a module's: NAME.lib.lua.
function M.is_module(name)
  return name:sub(-#M.SUFFIX) == M.SUFFIX
end

-- The module name of a file name, or nil when it is no module's or its
-- name is not one require takes.
function M.name_of(file)
  if not M.is_module(file) then return nil end
  local name = file:sub(1, -#M.SUFFIX - 1)
  return name:match(M.NAME) and name or nil
end

local function dir_of(path)
  return path:match("^(.*)/[^/]*$")
end

-- The path of module name beside the script at path.
function M.path(script_path, name)
  local dir = dir_of(script_path)
  if dir == "" then dir = "/" end
  return (dir and (dir:gsub("/$", "") .. "/") or "") .. name .. M.SUFFIX
end

-- The module names of a directory, sorted (none when it cannot be read).
function M.names(dir)
  local out = {}
  for _, file in ipairs(M.list(dir == "" and "/" or dir or ".") or {}) do
    local name = M.name_of(file)
    if name then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

-- The module files of the sources' directories, sorted: {path, name}
-- (name nil: the file's name is not one require takes). For luaop --check.
function M.files(sources)
  local out = {}
  for _, s in ipairs(sources) do
    for _, file in ipairs(s.dir and M.list(s.path) or {}) do
      if M.is_module(file) and not file:match("^%.") then
        out[#out + 1] = { path = s.path .. "/" .. file, name = M.name_of(file) }
      end
    end
  end
  table.sort(out, function(a, b) return a.path < b.path end)
  return out
end

M.BAD_NAME = "a module's name is lowercase letters, digits and _ (its file NAME" .. M.SUFFIX .. ")"

local function unknown(script_path, name)
  local why
  if type(name) ~= "string" or not name:match(M.NAME) then
    why = M.BAD_NAME
  else
    why = ("no file %s beside the script"):format(M.path(script_path, name))
  end
  -- (listing the directory waits: not from code that must not)
  local names = coroutine.isyieldable() and M.names(dir_of(script_path)) or {}
  local near = type(name) == "string" and definition.nearest(name, names)
  return ("module %s is not available to luaop scripts: %s%s; they may require %s, and the modules beside " ..
    "them: %s"):format(tostring(name), why, near and (" (did you mean %s?)"):format(near) or "",
    table.concat(M.BUILTIN, ", "), #names > 0 and table.concat(names, ", ") or "none")
end

-- Give a script's fresh environment (luaop.script.sandbox's, before the
-- script runs) the modules beside script_path. compile(path, text, env)
-- -> chunk | nil, err makes a chunk (luaop.script's, which may keep it).
-- Returns the table of what the script used (path -> text | false).
function M.attach(env, script_path, compile)
  local base = {} -- the environment as the sandbox made it, for each module's
  for k, v in next, env do base[k] = v end
  local mt = getmetatable(env)
  local used, loaded, loading = {}, {}, {}
  local function module_env()
    local e = {}
    for k, v in next, base do e[k] = v end
    e._G = e
    e.load = sandboxed.loader(e)
    return setmetatable(e, mt)
  end
  -- the module, or nil and the error to raise at require's caller
  local function load_module(name)
    if type(name) ~= "string" or not name:match(M.NAME) then return nil, unknown(script_path, name) end
    local got = loaded[name]
    if got ~= nil then return got end
    if loading[name] then
      local chain = {}
      for i = loading[name], #loading do chain[#chain + 1] = loading[i] end
      chain[#chain + 1] = name
      return nil, ("module %s is required around a cycle: %s"):format(name, table.concat(chain, " requires "))
    end
    if not coroutine.isyieldable() then
      return nil, ("module %s is not loaded yet, and code that must not wait (a handler, a watch map) cannot " ..
        "read its file: require it at the script's top level"):format(name)
    end
    local path = M.path(script_path, name)
    local text = M.read(path)
    used[path] = text or false
    if not text then return nil, unknown(script_path, name) end
    local chunk, err = compile(path, text, module_env())
    if not chunk then return nil, err end
    loading[#loading + 1] = name
    loading[name] = #loading
    -- (a module that raises leaves no trace of its loading: its error goes
    -- up as it is, with its own file and line)
    local _ <close> = setmetatable({}, { __close = function()
      loading[#loading] = nil
      loading[name] = nil
    end })
    local res = chunk(name, path)
    if res == nil then res = true end
    loaded[name] = res
    return res
  end
  local builtin = env.require
  env.require = function(name)
    if M.BUILTIN[name] then return builtin(name) end
    local m, err = load_module(name)
    if m == nil then error(err, 2) end
    return m
  end
  base.require = env.require
  return used
end
for _, name in ipairs(M.BUILTIN) do M.BUILTIN[name] = true end

-- Whether what a script used changed since: a module's text, or one it
-- missed now there.
function M.changed(used)
  for path, text in pairs(used or {}) do
    if (M.read(path) or false) ~= text then return true end
  end
  return false
end

-- The module files of used that changed since, sorted (for the log).
function M.changes(used)
  local out = {}
  for path, text in pairs(used or {}) do
    if (M.read(path) or false) ~= text then out[#out + 1] = path end
  end
  table.sort(out)
  return out
end

return M
