-- The reachability audit (docs/security.md, "What may be shared between
-- scripts"): several scripts loaded as luaop loads them (the test kit:
-- script/sandbox.lua's sandbox, the manager, informers and workers), each calling
-- every API function it can reach and keeping what it got; then everything
-- reachable from each script's environment is walked, further than a
-- script can go (tables' keys and values, every metatable whatever its
-- __metatable says, functions' upvalues, userdata's user values, threads'
-- frames), and anything that more than one script reaches, or that is one
-- of the runtime's own objects, fails the spec unless the list of what may
-- be shared allows it.
local testing = require "luaop.testing"
local client = require "luaop.client"
local proc = require "support.proc"
local kit = require "support.kit"

-- ---- what may be shared (docs/security.md keeps the same list) ----------

-- Upvalues of luaop's own functions that the walk does not follow: each is
-- reached only through what the function's code does with it, and that
-- code hands none of it out (what it returns is walked as an API result).
-- Named "file:upvalue", the file under lua/luaop/. Besides these, _ENV (luaop's globals, read by
-- name in its own code) and upvalues that are whole modules (in
-- package.loaded) are such upvalues of every luaop function.
local CODE_ONLY = {
  ["script/sandbox.lua:proxies"] = "the set of every view: written when a view is made, read by rawset to refuse a view",
  ["script/sandbox.lua:t"] = "the table behind a read-only view: its metamethods hand out a view of its tables, "
    .. "its other values as they are",
  ["script/sandbox.lua:hidden"] = "a view's hidden names (string.dump): read only",
  ["script/sandbox.lua:views"] = "the script's own views, keyed by the tables they show: read and written by readonly() only",
  ["client/view.lua:view_methods"] = "the views' methods (functions only), written once at load: indexed by name",
  ["client/view.lua:view_fields"] = "the names a view reads from its client (namespace, server), written once at load",
  ["time.lua:month_days"] = "month lengths, written once at load: read by time.parse",
  ["cjson.lua:EXPECTED"] = "decode errors' wording, written once at load: read by decode_error",
  ["cjson.lua:TOKENS"] = "token names, written once at load: read by decode_error",
  ["cjson.lua:SKIP"] = "a marker normalize() returns and encode compares with, never handed out",
  ["client/view.lua:watch_methods"] = "the watch handles' methods (functions only), written once at load",
  ["script/sandbox.lua:client_views"] = "the script's own cache, client -> its view: read and written by its luaop.client only",
  ["time.lua:time"] = "luaop.time, whose format time.format_micro calls",
  ["client/view.lua:viewed"] = "view or watch handle -> its client or watch: read by a method for its own self",
  ["client/view.lua:quotas"] = "view -> its script's count of open watches: read by a view's watch for its own self",
  ["client/view.lua:counted"] = "watch handle -> the count it is in: read when that handle closes, ends or is collected",
  ["context.lua:private"] = "ctx -> what it works with (manager, client, controller): read by a method for its own self",
  ["metrics.lua:private"] = "a metric's handle -> its record (weak keys): read by the handle's methods for their own "
    .. "self only",
  ["definition.lua:budgets"] = "definition -> its budgets (weak keys): written by luaop.controller (define) for the "
    .. "definition it is given, read by the workers; no function a script can call reads it",
}

-- Objects shared on purpose, each with its reason (none yet: Lua's
-- math.random, whose state every script would share, is replaced by one
-- generator per script, luaop.random).
local SHARED = {}

-- The runtime's own objects, found in `world` (the test kit's environment).
local function internal_objects(world)
  local out = {}
  local function add(v, what)
    if type(v) == "table" or type(v) == "userdata" or type(v) == "thread" then out[v] = out[v] or what end
  end
  add(_G, "_G")
  add(debug.getregistry(), "the registry")
  add(package.loaded, "package.loaded")
  for name, m in pairs(package.loaded) do
    add(m, "module " .. name)
    if type(m) == "table" and (name == "luaop" or name:match("^luaop%.")) then
      for k, v in pairs(m) do add(v, ("module %s's %s"):format(name, tostring(k))) end
    end
  end
  local mgr = world.manager
  add(mgr, "the manager")
  add(mgr.informers, "the manager's informers")
  for id, e in pairs(mgr.informers) do
    add(e, "informer entry " .. id)
    add(e.inf, "informer " .. id)
    add(e.inf.store, "the store of informer " .. id)
  end
  for name, c in pairs(mgr.controllers) do
    add(c, "controller " .. name)
    add(c.log, "the logger of controller " .. name)
    add(c.queue, "the queue of controller " .. name)
  end
  add(mgr.client, "the manager's client")
  add(client.default(), "the shared client")
  add(getmetatable(client.default()), "the client class")
  return out
end

local function is_luaop_source(src)
  return src:match("[/@]luaop/[%w_/]+%.lua$") ~= nil
end

-- modules: package.loaded's, and luaop.core's (the C half: api, json, task...)
local modules = {}
for _, m in pairs(package.loaded) do modules[m] = true end
for _, m in pairs(require("luaop.core")) do
  if type(m) == "table" then modules[m] = true end
end

-- light userdata (a bare pointer: no fields, no metatable of its own)
local function is_light(v)
  -- (setuservalue refuses light userdata; a full one has no value number 10^6
  -- to set, so nothing changes)
  return type(v) == "userdata" and not pcall(debug.setuservalue, v, nil, 1000000)
end

-- Why a value may be shared, or nil.
local function may_share(v, how)
  local t = type(v)
  if t ~= "table" and t ~= "function" and t ~= "userdata" and t ~= "thread" then return "a value" end
  if is_light(v) then return "light userdata" end
  if SHARED[v] then return SHARED[v] end
  if t == "function" then
    local info = debug.getinfo(v, "Su")
    if info.what == "C" and info.nups == 0 then return "a C function without upvalues" end
    if info.what ~= "C" and is_luaop_source(info.source) then return "a function of luaop's own code" end
    return nil
  end
  if how.sealed then return how.sealed end
  return nil
end

-- A metatable whose fields are functions, strings and booleans, its
-- __index (if a table) holding only functions: indexing what it is set on
-- yields functions, never a table; sandbox getmetatable does not hand it
-- out. (Its __index table is then reached only by lookups of a name.)
local function sealed(mt)
  for _, v in next, mt do
    local t = type(v)
    if t ~= "function" and t ~= "string" and t ~= "boolean" and t ~= "table" then return false end
  end
  local idx = rawget(mt, "__index")
  for k, v in next, mt do
    if type(v) == "table" and not (k == "__index" and v == idx) then return false end
  end
  if type(idx) == "table" then
    if debug.getmetatable(idx) ~= nil then return false end
    for _, v in next, idx do
      if type(v) ~= "function" then return false end
    end
  end
  return true
end

-- Everything reachable from root: object -> {path = first path, exposed
-- = reached by an edge a script can follow as a value, sealed = why}.
local function walk(root, name)
  local seen, order = {}, {}
  local queue, head, tail = { { root, name, "value" } }, 1, 1 -- breadth first: first paths are shortest
  local skipped = {}
  while queue[head] do
    local v, path, mode, parent = table.unpack(queue[head])
    queue[head], head = nil, head + 1
    local t = type(v)
    if t == "string" and not seen["<string metatable>"] then
      -- the metatable every string shares (sandbox getmetatable hides it)
      seen["<string metatable>"] = { path = path }
      tail = tail + 1
      queue[tail] = { debug.getmetatable(""), path .. "<string metatable>", "mt", nil }
    end
    if t == "table" or t == "function" or t == "userdata" or t == "thread" then
      local s = seen[v]
      local first = s == nil
      if first then
        s = { path = path, parent = parent }
        seen[v] = s
        order[#order + 1] = v
      end
      if mode == "value" then s.exposed = true end
      if mode == "mt" and t == "table" and sealed(v) then
        s.sealed = "a sealed metatable (functions only, no __index table of tables)"
      end
      local function push(x, p, m)
        tail = tail + 1
        queue[tail] = { x, p, m or "value", v }
      end
      if first then
        if t == "table" then
          local idx = mode == "mt" and sealed(v) and rawget(v, "__index")
          for k, x in next, v do
            push(k, path .. "<key " .. tostring(k) .. ">")
            if type(x) == "table" and rawequal(x, idx) then
              push(x, path .. ".__index", "mtindex")
            else
              push(x, path .. "." .. tostring(k))
            end
          end
          local mt = debug.getmetatable(v)
          push(mt, path .. "<metatable>", "mt")
          -- what a read-only view hands out (views of the table's tables,
          -- its other values) is what pairs yields through its __pairs
          if type(mt) == "table" and type(rawget(mt, "__pairs")) == "function" then
            local ok, err = pcall(function()
              for k, x in pairs(v) do push(x, path .. ":" .. tostring(k)) end
            end)
            assert(ok, err)
          end
        elseif t == "function" then
          local info = debug.getinfo(v, "Su")
          local file = info.source:match("luaop/([%w_/]+%.lua)$") or info.short_src
          for i = 1, info.nups do
            local uname, x = debug.getupvalue(v, i)
            local ours = info.what ~= "C" and is_luaop_source(info.source)
            if ours and (uname == "_ENV" and x == _G or modules[x] or CODE_ONLY[file .. ":" .. uname]) then
              skipped[file .. ":" .. uname] = true
            else
              push(x, ("%s^%s"):format(path, uname ~= "" and uname or tostring(i)))
            end
          end
        elseif t == "userdata" then
          push(debug.getmetatable(v), path .. "<metatable>", "mt")
          if not is_light(v) then
            for n = 1, 16 do
              local x, ok = debug.getuservalue(v, n)
              if not ok then break end
              push(x, ("%s<uservalue %d>"):format(path, n))
            end
          end
        else -- a thread: its frames' functions and locals
          for level = 0, 1000 do
            local info = debug.getinfo(v, level, "f")
            if not info then break end
            push(info.func, ("%s<frame %d>"):format(path, level))
            for i = 1, 1000 do
              local lname, x = debug.getlocal(v, level, i)
              if not lname then break end
              push(x, ("%s<frame %d local %s>"):format(path, level, lname))
            end
          end
        end
      end
      if mode == "mtindex" and first then s.sealed = "the method table of a sealed metatable (functions only)" end
    end
  end
  return seen, skipped, order
end

-- The environment of a loaded script: its reconcile's _ENV.
local function env_of(defs)
  local f = defs[1].reconcile
  for i = 1, math.huge do
    local n, v = debug.getupvalue(f, i)
    if not n then break end
    if n == "_ENV" then return v end
  end
  error("the reconcile has no _ENV upvalue")
end

-- What a script does: every API function it can reach, with plausible
-- arguments, its results kept in the global R (walked with the rest).
local function script_text(name)
  return ([==[
local luaop = require "luaop"
local cjson, cjson_safe = require "cjson", require "cjson.safe"
R = {}
-- keep(label, ...): the values, as R["label 1"], R["label 2"], ...
local function keep(label, ...)
  for i = 1, select("#", ...) do R[label .. " " .. i] = (select(i, ...)) end
  return ...
end
local NAME = %q
local function try(label, f, ...) keep(label, pcall(f, ...)) end
-- every method a handle offers, by name (those it lacks are skipped)
-- (CALLED["kind:name"]: what was called, for the spec to check none is missed)
CALLED = {}
local function each(label, h, calls, plain)
  for i, c in ipairs(calls) do
    local f = h[c[1]]
    if type(f) == "function" then
      CALLED[label:gsub("%%d", "") .. ":" .. c[1]] = true
      if plain then keep(("%%s.%%s#%%d"):format(label, c[1], i), pcall(f, table.unpack(c, 2)))
      else keep(("%%s:%%s#%%d"):format(label, c[1], i), pcall(f, h, table.unpack(c, 2))) end
    end
  end
end
local function cm(n) return { apiVersion = "v1", kind = "ConfigMap",
  metadata = { name = n .. "-" .. NAME, namespace = "default" }, data = { k = "v" } } end
keep("top", luaop, cjson, cjson_safe, luaop.client(), luaop.log, luaop.time, luaop.json, string, table, math, utf8,
  coroutine, os, _G, getmetatable(""), getmetatable(luaop), getmetatable(luaop.client()))
keep("cjson", cjson.new(), cjson_safe.new(), cjson.array_mt, cjson.empty_array, cjson.null, luaop.null)
local handlers = luaop.controller { name = NAME .. "-handlers", resource = "v1/Secret", namespace = "default",
  on_add = function(ctx, obj) keep("on_add", ctx, obj, ctx.log, getmetatable(ctx)) end }
return { luaop.controller { name = NAME, resource = "v1/ConfigMap", namespace = "default",
  watches = { { "v1/Secret", map = function(obj, ctx)
    keep("map", obj, ctx, ctx.log, ctx:get("ConfigMap", { namespace = "default", name = "x" }), ctx:list("ConfigMap"))
    return {}
  end } },
  reconcile = function(ctx, req)
    if R.done then return end
    R.done = true
    keep("reconcile", ctx, req, ctx.log, ctx.log:with { a = 1 }, coroutine.running(), getmetatable(ctx))
    each("ctx", ctx, {
      { "get", "ConfigMap", req }, { "get", "ConfigMap", "missing", "default" }, { "get", "v1/Secret", "s", "default" },
      { "list", "ConfigMap" }, { "list", "ConfigMap", { namespace = "default", labels = { a = "b" } } },
      { "list", "v1/Secret", { namespace = "default" } }, { "list", "v1/Namespace" },
      { "cache", "ConfigMap" }, { "cache", "v1/ConfigMap", { namespace = "default" } },
      { "create", cm("made") }, { "update", cm("made") }, { "update_status", cm("made") },
      { "apply", cm("applied") }, { "patch", "ConfigMap", { namespace = "default", name = "made-" .. NAME },
        { data = { p = "q" } } },
      { "event", { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "x", namespace = "default" } },
        "Normal", "Seen", "a note" },
      { "delete", "ConfigMap", { namespace = "default", name = "made-" .. NAME } },
      { "delete", cm("applied") }, { "delete", "ConfigMap", { namespace = "default", name = "none" } },
    })
    each("ctx.log", ctx.log, { { "info", "hello", { a = 1 } }, { "error", "oops" }, { "debug", "dbg" }, { "with", { b = 2 } } })
    for n, c in ipairs { luaop.client(), luaop.client { namespace = "default" } } do
      local cn = "client" .. n
      keep(cn, c, c.namespace, c.server)
      each(cn, c, {
        { "get", "ConfigMap", "x", "default" }, { "get", "ConfigMap", "missing" }, { "get", "Nope", "x" },
        { "list", "ConfigMap" }, { "list", "ConfigMap", { each_page = function(items) keep("each_page", items) end } },
        { "create", cm("c") }, { "update", cm("c") }, { "update_status", cm("c") }, { "apply", cm("c") },
        { "patch", "ConfigMap", "c-" .. NAME, { data = { z = "1" } } }, { "delete", "ConfigMap", "c-" .. NAME },
        { "resolve", "ConfigMap" }, { "resolve", "v1/Secret" }, { "namespace_of", {}, "x" },
        { "default" }, { "new" }, { "error", 404, nil }, { "error_text", "x" }, { "is_error", {} },
        { "forget_discovery_not" },
      })
      CALLED["client:watch"] = true
      local w = keep(cn .. ":watch", c:watch("ConfigMap", { timeout = 1 }))
      if type(w) == "table" or type(w) == "userdata" then
        keep(cn .. ":watch fields", w.raw, w.err, getmetatable(w))
        each(cn .. ":watch", w, { { "close" }, { "next" }, { "events" } }) -- (closed first: next does not wait)
      end
    end
    local t = keep("spawn", luaop.spawn(function(...) return ... end, 1, {}))
    each("spawn", t, { { "wait" } })
    each("luaop.log", luaop.log, { { "with", { c = 3 } }, { "info", "x" }, { "error", "x" }, { "debug", "x" } })
    local owner = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "o", uid = "u", namespace = "default" } }
    each("luaop", luaop, {
      { "logger", "x" }, { "copy", { a = { 1, 2 } } }, { "array" }, { "array", { 1 } }, { "controller_of", {} }, { "hash", { 1 } },
      { "set_controller", { metadata = { namespace = "default" } }, owner }, { "requeue_after", 1 }, { "requeue" },
      { "terminal", "x" }, { "terminal", { reason = "NotFound", code = 404, message = "m" } },
      { "is_error", {} }, { "controller", { name = "inner", resource = "v1/Pod", reconcile = function() end } },
      { "client" }, { "client", { namespace = "x" } }, { "sleep", 0 }, { "spawn", function() return {} end },
      { "array", setmetatable({}, { __index = function() return 1 end }) },
    }, true)
    each("luaop.time", luaop.time, { { "parse", "2030-01-01T00:00:00Z" }, { "format", 0 }, { "format_micro", 0.5 },
      { "wall" }, { "monotonic" } }, true)
    local obj = { metadata = { generation = 1 } }
    each("luaop.conditions", luaop.conditions, { { "set", obj, { type = "Ready", status = "True", reason = "Done" } },
      { "get", obj, "Ready" }, { "is_true", obj, "Ready" }, { "is_false", obj, "Ready" }, { "remove", obj, "Ready" },
      { "set", obj, { type = "bad type" } } }, true)
    each("luaop.webhook", luaop.webhook, { { "validating", { resource = "v1/Pod", validate = function() end } },
      { "mutating", { resource = "v1/Pod", mutate = function() end } },
      { "conversion", { resource = "example.com/At", convert = function(o) return o end } },
      { "validating", { resource = "Pod" } } }, true)
    local mname = "reach_" .. NAME
    each("luaop.metrics", luaop.metrics, {
      { "counter", { name = mname .. "_total", help = "h", labels = { "k" } } },
      { "gauge", { name = mname .. "_level", help = "h" } },
      { "histogram", { name = mname .. "_seconds", help = "h", buckets = { 1 } } },
      { "counter", { name = "workqueue_adds_total", help = "h" } } }, true)
    for i, h in ipairs { R["luaop.metrics.counter#1 2"], R["luaop.metrics.gauge#2 2"],
      R["luaop.metrics.histogram#3 2"] } do
      each("metric" .. i, h, { { "inc", { k = "v" }, 1 }, { "inc", nil, 1 }, { "dec", nil, 1 }, { "set", nil, 2 },
        { "observe", nil, 0.5 } })
    end
    each("luaop.json", luaop.json, { { "decode", '{"a":[1,{}]}' }, { "encode", { a = luaop.array() } }, { "hash", { a = { 1, "x" } } },
      { "array" }, { "is_array", {} }, { "peek", '{"a":1}', "a" }, { "decode_page", '{"items":[]}' }, { "page_texts", '{"items":[{}]}' },
      { "event", '{"type":"ADDED","object":{}}' }, { "cut", { drop = { "data" } } }, { "trim", '{"a":1}' } }, true)
    for n, cj in ipairs { cjson, cjson_safe, cjson.new(), cjson_safe.new() } do
      local calls = { { "decode", '{"a":[1,{}]}' }, { "decode", "nope" }, { "encode", { 1, 2, nil, 4 } }, { "new" } }
      for k, f in pairs(cj) do
        if type(f) == "function" and k ~= "new" and k ~= "encode" and k ~= "decode" then calls[#calls + 1] = { k } end
      end
      each("cjson" .. n, cj, calls, true)
    end
    try("error", error, { reason = "mine" })
    local ok, err = luaop.client():get("ConfigMap", "missing")
    keep("error value", ok, err, err and tostring(err), luaop.is_error(err))
    try("sleep", luaop.sleep, 0)
  end }, handlers }
]==]):format(name)
end

local function cm(name)
  return { apiVersion = "v1", kind = "ConfigMap", metadata = { name = name, namespace = "default" }, data = {} }
end

describe("the reachability audit", function()
  local w = kit.per_test(before_each, after_each) -- (w.env: the world, w.dir: its scripts)

  it("finds nothing a script reaches that another script reaches too or that is the runtime's own, beyond what may be shared", function()
    local names = { "one", "two", "three" }
    local paths = {}
    for i, n in ipairs(names) do paths[i] = proc.write(w.dir, n .. ".lua", script_text(n)) end
    w.env = testing.env { scripts = paths, objects = { cm("x"),
      { apiVersion = "v1", kind = "Secret", metadata = { name = "s", namespace = "default" } } } }
    w.env:create(cm("y"))
    w.env:advance(2)
    local internal = internal_objects(w.env)
    local reach, ran, skipped, orders = {}, {}, {}, {}
    for i, p in ipairs(paths) do
      local env = env_of(w.env.scripts[p])
      ran[i] = rawget(env, "R") and rawget(env, "R").done
      local sk
      reach[i], sk, orders[i] = walk(env, names[i])
      for k in pairs(sk) do skipped[k] = true end
    end
    -- what a walk first met through one of the runtime's objects is that
    -- object's finding, not one of its own (a script that reaches the
    -- manager reaches every script through it)
    local tainted = {}
    for i, seen in ipairs(reach) do
      local t = {}
      for _, v in ipairs(orders[i]) do
        local p = seen[v].parent
        if p ~= nil and (t[p] or (internal[p] and not may_share(p, seen[p]))) then t[v] = true end
      end
      tainted[i] = t
    end
    assert.are.same({ true, true, true }, ran, "every script's reconcile ran its calls")
    -- a breach: what may not be shared and is the runtime's or another
    -- script's; reported where a walk first met one (what it leads on to
    -- is left out)
    local function breach(i, v, s)
      local others = {}
      for j, other in ipairs(reach) do
        if j ~= i and other[v] and not tainted[j][v] then others[#others + 1] = names[j] end
      end
      if may_share(v, s) or not (internal[v] or #others > 0) then return nil end
      return others
    end
    local found, told = {}, {}
    for i, seen in ipairs(reach) do
      for v, s in pairs(seen) do
        local others = breach(i, v, s)
        if others and not told[v] and not tainted[i][v] and not (s.parent and breach(i, s.parent, seen[s.parent])) then
          told[v] = true
          found[#found + 1] = ("%s (%s)%s%s"):format(s.path, type(v),
            internal[v] and ": the runtime's " .. internal[v] or "",
            #others > 0 and ", reached by " .. table.concat(others, " and ") .. " too" or "")
        end
      end
    end
    table.sort(found)
    assert.are.same({}, found)
    -- and it called every method its handles offer
    local e1 = env_of(w.env.scripts[paths[1]])
    local R, called = rawget(e1, "R"), rawget(e1, "CALLED")
    local function methods(kind, x, out)
      local mt = debug.getmetatable(x)
      local idx = mt and rawget(mt, "__index")
      local function add(t)
        for k, f in next, t do
          if type(f) == "function" and type(k) == "string" and not k:match("^__") then out[#out + 1] = kind .. ":" .. k end
        end
      end
      if type(x) == "table" then add(x) end
      if type(idx) == "table" then add(idx) end
      if type(idx) == "function" then
        for i = 1, math.huge do
          local n, u = debug.getupvalue(idx, i)
          if not n then break end
          if type(u) == "table" and n ~= "_ENV" then add(u) end
        end
      end
      return out
    end
    local offered = {}
    methods("ctx", R["reconcile 1"], offered)
    methods("ctx.log", R["reconcile 3"], offered)
    methods("client", R["client1 1"], offered)
    methods("client:watch", R["client1:watch 1"], offered)
    methods("spawn", R["spawn 1"], offered)
    methods("luaop", package.loaded.luaop, offered)
    methods("luaop.time", package.loaded.luaop.time, offered)
    methods("luaop.conditions", package.loaded.luaop.conditions, offered)
    methods("luaop.webhook", package.loaded.luaop.webhook, offered)
    methods("luaop.json", package.loaded.luaop.json, offered)
    methods("luaop.metrics", package.loaded.luaop.metrics, offered)
    for i = 1, 3 do methods("metric", R["luaop.metrics." .. ({ "counter", "gauge", "histogram" })[i] .. "#" .. i .. " 2"],
      offered) end
    local missed = {}
    for _, m in ipairs(offered) do
      if not called[m] then missed[#missed + 1] = m end
    end
    table.sort(missed)
    assert.are.same({}, missed, "methods the probe does not call")
    -- and no entry of the list outlives the upvalue it names
    local stale = {}
    for k in pairs(CODE_ONLY) do
      if not skipped[k] then stale[#stale + 1] = k end
    end
    table.sort(stale)
    assert.are.same({}, stale, "CODE_ONLY entries the walk never met")
  end)

  it("lets no script change what another script's ctx, client, errors, loggers or definitions do", function()
    -- a_attack.lua tries every route the audit found on 0f98892; b_victim.lua
    -- then reads, writes and logs as usual
    local a = proc.write(w.dir, "a_attack.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "attack", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function(ctx, req)
    if req.name ~= "go" then return end
    local c, tried = luaop.client(), {}
    local function try(what, f) tried[#tried + 1] = what .. "=" .. tostring((pcall(f))) end
    try("cache", function() ctx:cache("ConfigMap").get = function() return { data = { forged = "yes" } } end end)
    try("default", function()
      local real = c.create
      c.default().create = function(self, obj, o)
        obj.metadata.name = "stolen"
        return real(self, obj, o)
      end
    end)
    try("client class", function() c.__index.update = nil end)
    try("resolve", function() c:resolve("ConfigMap").resource = "secrets" end)
    try("error class", function() select(2, c:get("ConfigMap", "missing")).__index.forged = "yes" end)
    try("ctx class", function() ctx.__index.get = function() return { data = { forged = "yes" } } end end)
    try("logger class", function() ctx.log.__index.info = function() end end)
    try("definition class", function()
      luaop.controller({ name = "d", resource = "v1/Pod", reconcile = print }).__index.forged = "yes"
    end)
    -- a list's filter is given copies: what it changes, no other reads
    ctx:list("ConfigMap", { filter = function(o) o.data = { forged = "yes" } return true end })
    ctx.log:error("tried", { tried = table.concat(tried, " ") })
  end }
]])
    local b = proc.write(w.dir, "b_victim.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "victim", resource = "v1/Secret", namespace = "default",
  reconcile = function(ctx, req)
    local c = luaop.client()
    local made = c:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "b-made" } }
    local _, err = c:get("ConfigMap", "missing")
    local go = ctx:get("ConfigMap", "go", "default")
    local def = luaop.controller { name = "d", resource = "v1/Pod", reconcile = print }
    ctx.log:info("victim", { made = made and made.metadata.name, forged_error = tostring(err.forged),
      forged_definition = tostring(def.forged),
      go = go and go.data and (go.data.forged or go.data.k) })
  end }
]])
    w.env = testing.env { scripts = { a, b } }
    assert(w.env:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "go", namespace = "default" },
      data = { k = "v" } })
    local tried = w.env:logs { msg = "^tried$" }[1]
    assert.are.equal("cache=false default=false client class=false resolve=false error class=false " ..
      "ctx class=false logger class=false definition class=false", tried and tried.fields.tried)
    assert(w.env:create { apiVersion = "v1", kind = "Secret", metadata = { name = "s", namespace = "default" } })
    local seen = w.env:logs { msg = "^victim$" }[1]
    assert.are.same({ made = "b-made", forged_error = "nil", forged_definition = "nil", go = "v",
      namespace = "default", name = "s" },
      seen and seen.fields)
    assert.is_not_nil(w.env:get("ConfigMap", "b-made"))
  end)
end)
