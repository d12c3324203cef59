-- luaop.script - operator scripts: where they are, loading each in an
-- environment of its own, and reloading them when their files change.
--
-- A source is what one --script names: a .lua file, or a directory whose
-- *.lua files (not hidden ones) are each a script. Directories are watched
-- the way the kubelet updates a ConfigMap volume (the files are symlinks
-- through ..data, which is swapped atomically) and the way an editor saves
-- (write in place, or write a new file and rename it); a file source is
-- watched through its directory.
--
-- A new version is loaded beside the old. If it does not load, raises at
-- its top level, or returns no valid definition, the old version keeps
-- serving and the error (file, line, message) is logged and counted.
local core = require "luaop.core"
local time = require "luaop.time"
local logging = require "luaop.logging"
local luaop = require "luaop"
local client = require "luaop.client"
local definition = require "luaop.definition"
local events = require "luaop.events"
local supervisor = require "luaop.supervisor"

local fs = core.fs
local M = {}

-- How long a directory must be quiet before its scripts are loaded again.
M.DEBOUNCE = 0.02

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
        if name:match("%.lua$") and not name:match("^%.") and not seen[path] and fs.kind(path) == "file" then
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

-- ---- the sandbox ------------------------------------------------------------
--
-- A script's environment is built from an allowlist (docs/security.md), fresh
-- for each script, so globals a script sets stay its own:
-- - the base functions that touch nothing outside Lua; load reads text
--   only, into the script's own environment; no loadfile, dofile;
-- - string, table, math, utf8, coroutine, luaop and os's clock, date,
--   difftime and time as read-only views, so no script can change what
--   another sees (a write raises, nested tables included); require hands
--   out only these, and cjson and cjson.safe (luaop.cjson), an instance of
--   each of the script's own;
-- - getmetatable answers only for metatables the script set itself, so the
--   string metatable and luaop's own classes are out of reach (a JSON
--   array's is cjson.array_mt, a read-only stand-in setmetatable takes for
--   luaop's array metatable); setmetatable
--   refuses __gc (a finalizer runs in whatever task the collector happens
--   to interrupt, under nobody's budget);
-- - collectgarbage offers only "collect", "count", "step" and "isrunning";
-- - coroutine's resume and close refuse a luaop task's thread, and yield
--   refuses to leave one: a task's thread is the scheduler's alone.
-- No io, no os beyond time, no debug, no package, no C modules, no binary
-- chunks: nothing that reads a file, the environment or a credential.

local base_load, base_setmetatable, base_getmetatable, base_rawset = load, setmetatable, getmetatable, rawset
local base_rawget = rawget
local co_resume, co_close, co_yield, co_running = coroutine.resume, coroutine.close, coroutine.yield, coroutine.running
local is_task = core.task.is_task
local sandboxed = require "luaop.sandbox" -- what src/sandbox.c gives scripts (opened with luaop.core)
local cjson = require "luaop.cjson"
local random = require "luaop.random"
local array_mt = base_getmetatable(core.json.array()) -- luaop's, of every JSON array

M.BASE = { "assert", "error", "ipairs", "next", "pairs", "pcall", "print", "rawequal", "rawget", "rawlen",
  "select", "tonumber", "tostring", "type", "xpcall", "_VERSION" }
M.LIBRARIES = { "string", "table", "math", "utf8", "coroutine" }
M.OS = { "clock", "date", "difftime", "time" }
M.OS_REFUSED = { "execute", "exit", "getenv", "remove", "rename", "tmpname", "setlocale" }
-- globals whose absence deserves more than "attempt to index a nil value"
M.REFUSED = { io = "files", debug = "introspection", package = "modules beyond require",
  dofile = "files", loadfile = "files" }

local proxies = base_setmetatable({}, { __mode = "k" }) -- every read-only view

-- what a view leaves out: string.dump (it makes binary chunks)
M.HIDDEN = { string = { dump = true } }

-- A read-only view of t (views of its tables, made on demand, are cached
-- in `views`, one set per script).
local function readonly(t, name, views)
  local v = views[t]
  if v then return v end
  local hidden = M.HIDDEN[name] or {}
  local function wrap(k, x)
    if hidden[k] then return nil end
    if type(x) == "table" then return readonly(x, name .. "." .. tostring(k), views) end
    return x
  end
  v = base_setmetatable({}, {
    __index = function(_, k) return wrap(k, t[k]) end,
    __newindex = function(_, k)
      error(("%s is read-only: a script cannot change %s.%s"):format(name, name, tostring(k)), 2)
    end,
    __pairs = function()
      return function(_, k)
        local nk, x = next(t, k)
        while hidden[nk] do nk, x = next(t, nk) end
        return nk, wrap(nk, x)
      end, v, nil
    end,
    __len = function() return #t end,
    __metatable = false,
  })
  views[t] = v
  proxies[v] = true
  return v
end

-- The coroutine library a script gets: a task's thread (what
-- coroutine.running() gives a reconcile) belongs to the scheduler, which
-- resumes it when what it waits for comes, exactly once; resumed by a
-- script it would run on while its wait is still pending. The functions
-- hold nothing but C functions and a string (no _ENV: they reach nothing
-- of the runtime's), and are made for each script.
local base_error = error
local TASK_THREAD = "is a luaop task's own thread, which only luaop's scheduler resumes, closes or suspends"
local function sandbox_coroutine()
  local c = {}
  for k, v in pairs(coroutine) do c[k] = v end
  c.resume = function(co, ...)
    if is_task(co) then base_error("coroutine.resume: the coroutine " .. TASK_THREAD, 2) end
    return co_resume(co, ...)
  end
  c.close = function(co)
    if is_task(co) then base_error("coroutine.close: the coroutine " .. TASK_THREAD, 2) end
    return co_close(co)
  end
  c.yield = function(...)
    if is_task((co_running())) then
      base_error("coroutine.yield outside a coroutine the script made: the running one " .. TASK_THREAD ..
        " (a task waits with luaop.sleep, a request, ...)", 2)
    end
    return co_yield(...)
  end
  return c
end

-- A fresh environment for one script.
function M.env()
  local env, views, own = {}, {}, base_setmetatable({}, { __mode = "k" })
  for _, k in ipairs(M.BASE) do env[k] = _G[k] end
  local modules = {}
  for _, k in ipairs(M.LIBRARIES) do
    modules[k] = readonly(k == "coroutine" and sandbox_coroutine() or _G[k], k, views)
    env[k] = modules[k]
  end
  -- math with a generator of its own (Lua's state is one for every script)
  local math_own = {}
  for k, v in pairs(math) do math_own[k] = v end
  math_own.random, math_own.randomseed = random.new()
  modules.math = readonly(math_own, "math", views)
  env.math = modules.math
  local os_time = {}
  for _, k in ipairs(M.OS) do os_time[k] = os[k] end
  for _, k in ipairs(M.OS_REFUSED) do
    os_time[k] = function() error(("os.%s is not available to luaop scripts"):format(k), 2) end
  end
  env.os = readonly(os_time, "os", views)
  modules.os = env.os
  -- luaop, with luaop.client() a view of its own (luaop.client's view:
  -- methods over the client, never the client, its class or its caches)
  local client_view = client.view
  local client_views = base_setmetatable({}, { __mode = "k" })
  local watches = { open = 0, max = M.MAX_WATCHES } -- this script's, across its views
  local function script_client(opts)
    local c = luaop.client(opts)
    local view = client_views[c]
    if not view then
      view = client_view(c, watches)
      client_views[c] = view
    end
    return view
  end
  local overlay = {}
  for k, v in pairs(luaop) do overlay[k] = v end
  overlay.client = script_client
  -- a task started from code that must not wait (a handler, a watch map)
  -- would wait and write for it, on an instructions-only account
  overlay.spawn = function(fn, ...)
    if not coroutine.isyieldable() then
      error("luaop.spawn from code that must not wait (a handler, a watch map): use a reconcile", 2)
    end
    local refused = core.task.refused() -- (its script's cap, or its end), at the caller's line
    if refused then error(refused, 2) end
    return luaop.spawn(fn, ...)
  end
  modules.luaop = readonly(overlay, "luaop", views)
  -- lua-cjson's interface, settings of the script's own; its array_mt a view
  local array_view = readonly(array_mt, "cjson.array_mt", views)
  local cjson_opts = { array_mt = array_view, empty_array = core.json.array() }
  modules.cjson = cjson.new(cjson_opts)
  modules["cjson.safe"] = cjson.new(cjson_opts, true)
  env.require = function(name)
    local m = modules[name]
    if m == nil then
      error(("module %s is not available to luaop scripts (they may require %s)"):format(tostring(name),
        "luaop, cjson, cjson.safe, string, table, math, utf8, coroutine or os"), 2)
    end
    return m
  end
  -- luaop's own (src/sandbox.c), so that what parsing is charged and its
  -- errors name the script's line
  env.load = sandboxed.loader(env)
  env.setmetatable = function(t, mt)
    if rawequal(mt, array_view) then return base_setmetatable(t, array_mt) end
    if type(mt) == "table" and base_rawget(mt, "__gc") ~= nil then
      error("__gc metamethods are not available to luaop scripts", 2)
    end
    local r = base_setmetatable(t, mt)
    if mt ~= nil then own[mt] = true end
    return r
  end
  env.getmetatable = function(v)
    local mt = base_getmetatable(v)
    if rawequal(mt, array_mt) then return array_view end
    if mt == nil or mt == false then return mt end
    if type(mt) == "table" and own[mt] then return mt end
    if type(mt) ~= "table" then return mt end -- a __metatable field's value
    return nil -- not the script's own: luaop's, or the string metatable
  end
  env.rawset = function(t, k, v)
    if proxies[t] then error("a read-only table cannot be changed, even with rawset", 2) end
    return base_rawset(t, k, v)
  end
  -- luaop's own (src/sandbox.c), so that a budget's error names the
  -- script's line
  env.collectgarbage = sandboxed.collectgarbage
  env._G = env
  return base_setmetatable(env, {
    __index = function(_, k)
      if M.REFUSED[k] then
        error(("%s is not available to luaop scripts (no %s in the sandbox)"):format(k, M.REFUSED[k]), 2)
      end
    end,
  })
end

-- compile(path, text) -> chunk | nil, "path:line: message"
function M.compile(path, text)
  return base_load(text, "@" .. path, "t", M.env())
end

-- The controller definitions a script's results hold: one, or a list.
function M.definitions(v)
  if definition.is_definition(v) then return { v } end
  if type(v) == "table" and #v > 0 then
    for _, d in ipairs(v) do
      if not definition.is_definition(d) then return nil end
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
-- must be ..."): name the field's line instead, the nearest line of text
-- that sets it.
local function field_line(err, path, text)
  local line, field = err:match("^" .. path:gsub("%p", "%%%0") .. ":(%d+): controller [^:]*: (%l+)")
  if not line then return err end
  line = tonumber(line)
  local best, n = nil, 0
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if l:find("%f[%w_]" .. field .. "%s*=") and (not best or math.abs(n - line) < math.abs(best - line)) then
      best = n
    end
  end
  if not best then return err end
  return ("%s:%d:%s"):format(path, best, err:sub(#path + #tostring(line) + 3))
end

-- The most watches (luaop.client():watch) one script may have open at once:
-- each holds a connection to the API server.
M.MAX_WATCHES = 100

-- The most tasks one version of a script may have live at once (its top
-- level's, its reconciles' and every task they spawn): --max-tasks.
M.MAX_TASKS = 1000

-- What one version of a script's tasks count against: core.task.owner.
function M.owner()
  return core.task.owner(M.MAX_TASKS)
end

-- Load and run a script's top level in a budgeted task: defs | nil, err.
-- owner: what its tasks count against (M.owner(); a new one by default),
-- to hand to Manager:set with the definitions. A load that fails stops it.
function M.load(path, text, owner)
  local chunk, err = M.compile(path, text)
  if not chunk then return nil, err end
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
      :format(path, M.LOAD_TIMEOUT)
  end
  local ok, res = out[1], out[2]
  if not ok then
    owner:stop()
    return nil, field_line(M.located(path, res), path, text)
  end
  local defs = M.definitions(res)
  if not defs then
    owner:stop()
    return nil, path .. ": the script returns no controller definition (return luaop.controller{...} or a list of them)"
  end
  return defs, owner
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

-- ---- the reloader ---------------------------------------------------------

local Reloader = {}
Reloader.__index = Reloader

function M.reloader(sources, manager)
  return setmetatable({
    sources = sources, manager = manager, loaded = {}, failed = {},
    reloads = { success = 0, error = 0 }, log = logging.logger("script"),
  }, Reloader)
end

-- luaop_script_reloads_total{script, result}, charged to the script's
-- metrics account (it goes with the script)
local function count_reload(self, path, result)
  core.metrics.series("luaop_script_reloads_total", { path, result }, self.manager:account(path)):add()
end

-- In a Pod (POD_NAME and POD_NAMESPACE from the downward API, as the
-- manifests set them): a Warning Event on the Pod, for `kubectl events`.
local function warn_pod(path, err)
  local pod, ns = os.getenv("POD_NAME"), os.getenv("POD_NAMESPACE")
  if not pod or not ns then return end
  events.record {
    regarding = { apiVersion = "v1", kind = "Pod", metadata = { name = pod, namespace = ns } },
    type = "Warning", reason = "ScriptLoadFailed", action = "Load", controller = "scripts",
    note = path .. ": " .. tostring(err):match("^[^\n]*"),
  }
end

function Reloader:fail(path, err)
  self.reloads.error = self.reloads.error + 1
  count_reload(self, path, "error")
  warn_pod(path, err)
  self.log:error("script reload failed, the running version stays", {
    script = path, error = tostring(err),
  })
end

-- Bring the manager in line with the files: load what is new or changed,
-- stop what is gone. On the first scan (first = true) every failure is
-- returned; later ones are logged, counted, and leave the old version.
function Reloader:scan(first)
  local present = {}
  local failures = {}
  local files, ferr = M.files(self.sources)
  if not files then
    if first then return nil, ferr end
    self.log:error("cannot read the scripts' directory; everything stays as it is", { error = ferr })
    return self:retry_later()
  end
  for _, path in ipairs(files) do
    present[path] = true
    local text, rerr = M.read(path)
    local cur = self.loaded[path]
    if not text then
      failures[#failures + 1] = path .. ": " .. tostring(rerr)
      if not first then self:fail(path, rerr) end
    elseif (not cur or cur.text ~= text) and self.failed[path] ~= text then
      local t0 = time.monotonic()
      local defs, err = M.load(path, text)
      local ok, set_failed
      if defs then
        local owner = err
        ok, err = self.manager:set(path, defs, owner)
        -- not the script's fault (a cache that did not sync yet, a name
        -- another script still holds): try again later, same text or not
        set_failed = not ok
        if not ok then owner:stop() end -- what its top level started ends
      end
      if ok then
        self.failed[path] = nil
        local names = {}
        for i, d in ipairs(defs) do names[i] = d.name end
        self.loaded[path] = { text = text, names = names }
        if not first then
          self.reloads.success = self.reloads.success + 1
          count_reload(self, path, "success")
          self.log:info(cur and "script reloaded" or "script loaded", {
            script = path, controllers = table.concat(names, ","),
            ms = math.floor((time.monotonic() - t0) * 1000 + 0.5),
          })
        end
      else
        if not set_failed then self.failed[path] = text end
        failures[#failures + 1] = tostring(err)
        if not first then
          self:fail(path, err)
          if set_failed then self:retry_later() end
        end
      end
    end
  end
  for path in pairs(self.loaded) do
    if not present[path] then
      self.manager:set(path, {})
      self.loaded[path] = nil
      self.failed[path] = nil
      self.reloads.success = self.reloads.success + 1
      self.manager:drop_account(path) -- its series, its reload counts among them
      self.log:info("script removed, its controllers stopped", { script = path })
    end
  end
  for path in pairs(self.failed) do -- one that never loaded, gone
    if not present[path] then
      self.failed[path] = nil
      self.manager:drop_account(path)
    end
  end
  if #failures > 0 then return nil, table.concat(failures, "\n") end
  return true
end

-- Scan again in a while (what failed may have been transient).
M.RETRY = 5
function Reloader:retry_later()
  if self.retrying then return end
  self.retrying = true
  core.task.spawn(function()
    core.task.sleep(M.RETRY)
    self.retrying = false
    self.pending = true
    if self.wake then self.wake:signal() end
  end)
end

-- The directories to watch: each directory source, and the directory of
-- each file source.
function Reloader:dirs()
  local out, seen = {}, {}
  for _, s in ipairs(self.sources) do
    local d = s.dir and s.path or (s.path:match("^(.*)/[^/]*$") or ".")
    if d == "" then d = "/" end
    if not seen[d] then
      seen[d] = true
      out[#out + 1] = d
    end
  end
  return out
end

-- Watch the sources and rescan after each quiet change, until stopped.
function Reloader:watch()
  local changed = core.task.cond()
  self.watchers = {}
  for _, d in ipairs(self:dirs()) do
    local w, err = fs.watch(d)
    if not w then
      self.log:error("cannot watch scripts, reloading is off for them", { directory = d, error = err })
    else
      self.watchers[#self.watchers + 1] = w
      core.task.spawn(function()
        while w:wait() do
          -- debounce: until nothing changed for a while
          repeat core.task.sleep(M.DEBOUNCE) until not w:take()
          self.pending = true
          changed:signal()
        end
      end)
    end
  end
  local function done() return self.stopped end
  supervisor.spawn("reloader", { name = "scripts", done = done }, function()
    while not self.stopped do
      if not self.pending then changed:wait() end
      if self.stopped then break end
      self.pending = false
      local ok, err = pcall(self.scan, self, false)
      if not ok then self.log:error("reloading scripts failed", { error = tostring(err) }) end
    end
  end)
  self.wake = changed
end

function Reloader:stop()
  self.stopped = true
  for _, w in ipairs(self.watchers or {}) do w:close() end
  if self.wake then self.wake:signal() end
end

return M
