-- luaop.script.sandbox - the environment a script loads in: fresh for each
-- script, built from an allowlist, with read-only views of what scripts share.
local core = require "luaop.core"
local luaop = require "luaop"
local client_view = require("luaop.client.view").view

local M = {}

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

local base_setmetatable, base_getmetatable, base_rawset = setmetatable, getmetatable, rawset
local base_rawget = rawget
local co_resume, co_close, co_yield, co_running = coroutine.resume, coroutine.close, coroutine.yield, coroutine.running
local is_task = core.task.is_task
local sandboxed = require "luaop.sandbox" -- what src/sandbox.c gives scripts (opened with luaop.core)
local cjson = require "luaop.cjson"
local random = require "luaop.random"
local script_metrics = require "luaop.metrics"
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
local base_error, base_pcall = error, pcall
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

-- What a wrapped function returned (after base_pcall), or its error
-- raised again at the line of the script that called the wrapper, as the
-- function's own name: never a line of this file.
local function at_caller(name, ok, ...)
  if ok then return ... end
  local err = ...
  if type(err) ~= "string" or err == "not enough memory" then base_error(err, 0) end
  local arg = err:match("^bad argument (#%d+ )to '[^']*'")
  if arg then err = err:gsub("^bad argument #%d+ to '[^']*'", "") end
  base_error((arg and "bad argument " .. arg .. "to '" .. name .. "'" or name .. ": ") .. err, 2) -- (tail called)
end

-- A fresh environment for one script (path: its file, whose version it
-- loads: luaop.metrics is that version's own).
function M.env(path)
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
  -- os's clocks are luaop's (the kit's virtual one under --test): time()
  -- and date() with no time are its wall clock's now, clock() its
  -- monotonic seconds (not the CPU's); with a time given, Lua's own
  local os_time = { difftime = os.difftime, clock = core.task.now }
  local os_t, os_d, wall = os.time, os.date, core.task.wall
  os_time.time = function(t)
    if t == nil then return math.floor(wall()) end
    return at_caller("os.time", base_pcall(os_t, t))
  end
  os_time.date = function(format, t)
    if t == nil then t = math.floor(wall()) end
    return at_caller("os.date", base_pcall(os_d, format, t))
  end
  for _, k in ipairs(M.OS_REFUSED) do
    os_time[k] = function() error(("os.%s is not available to luaop scripts"):format(k), 2) end
  end
  env.os = readonly(os_time, "os", views)
  modules.os = env.os
  -- luaop, with luaop.client() a view of its own (luaop.client's view:
  -- methods over the client, never the client, its class or its caches)
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
  overlay.metrics = script_metrics.face(path)
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


-- The most watches (luaop.client():watch) one script may have open at once:
-- each holds a connection to the API server.
M.MAX_WATCHES = 100

return M
