-- luaop.testing - the test kit: a script's real controllers, informers
-- and work queues against an in-memory API server (luaop.testing.apiserver), on a
-- clock that moves only when the test says so. No cluster, no sleeps.
--
--   local testing = require "luaop.testing"
--   local env = testing.env {
--     scripts = { "operators/at.lua" },     -- loaded as luaop loads them (sandbox, budgets)
--     manifests = { "manifests/crds" },     -- YAML files or directories: CRDs served, the rest created
--     objects = { {...} },                  -- more objects, as tables
--     time = "2026-11-25T10:00:00Z",        -- where the clock starts (default 2030-01-01T00:00:00Z)
--     namespace = "default",                -- the namespace luaop runs in (POD_NAMESPACE)
--     deadline = 30,                        -- this env's wall deadline, in seconds (luaop.testing.guard)
--     max_reconciles = 100,                 -- the livelock bound (luaop.testing.guard)
--   }
--   env:create(at)                          -- as a user would; the operators react, until idle
--   env:advance(3600)                       -- an hour passes: what comes due runs, in order
--   env:get("At", "x" [, "default"]).status.phase   -- ctx:get's order
--   env:actions { verb = "create", kind = "Pod" }
--   env:hold_watches(match) ... env:release_watches()  -- a cache that lags
--   env:stop()
--
-- Every call runs the world until it is idle: nothing is ready at the
-- clock's present time, and whatever waits, waits on time (a requeue_after,
-- a backoff) or on an event; within luaop.testing.guard's bounds (a
-- livelock fails, naming its controller and key; so does a run past the
-- test's wall deadline). Paths are found beside the calling spec file
-- first (luaop.testing.paths); a kind the API server does not serve, an
-- unknown option, filter key, verb or reason is an error at once
-- (luaop.testing.checks). One environment at a time (the kit takes the
-- process's API transport); busted (luaop.core as a module) or `luaop --test`.
local core = require "luaop.core"
local time = require "luaop.time"
local apiserver = require "luaop.testing.apiserver"
local client = require "luaop.client"
local manager = require "luaop.manager"
local events = require "luaop.events"
local script = require "luaop.script"
local guard = require "luaop.testing.guard"
local paths = require "luaop.testing.paths"
local checks = require "luaop.testing.checks"
local kit_metrics = require "luaop.testing.metrics"
local informer = require "luaop.informer"

local kit, api = core.kit, core.api

local M = {}

M.resolve, M.module = paths.resolve, require("luaop.testing.module").load -- testing.module(path): a NAME.lib.lua

M.START = "2030-01-01T00:00:00Z"
-- How many times advance() moves to the next due time at most (a reconcile
-- that requeues a microsecond later, for ever, would otherwise never end).
M.MAX_STEPS = 100000
M.EPSILON = 1e-6

local Env = {}
Env.__index = Env

-- The kit's syncs are a few objects: they leave the collector in its mode
-- (a switch to generational mode is a full collection: 18% of the CPU of
-- the operators' specs did that).
informer.GC_MODES = false
-- and each script is compiled once (luaop.script.compiled)
script.compiled = script.compiled or {}

guard.subscribe_busted() -- under busted: each test's deadline, and what a failing test's env logged

local current -- the environment that holds the transport

-- Run fn(...) in a task of its own and the loop until idle (within
-- luaop.testing.guard's bounds); its results, or raises its error. Raises
-- when it still waits once all is idle.
local function in_task(fn, ...)
  local res
  core.task.spawn(function(...) res = table.pack(xpcall(fn, function(e)
    if type(e) == "string" then return guard.trim(core.traceback(e, 2)) end
    return e
  end, ...)) end, ...)
  guard.run(current, current and current.stopping and { unguarded = true } or nil)
  if not res then
    error(guard.where() .. "still waiting once everything else was idle (for an event that will not come?)", 0)
  end
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- The kind server s serves for spec (a kind, or as the test may name one
-- too: a resource, a short name, resource.group), or raises what
-- s:resolve_kind says of it.
local function resolve_kind(s, spec, what)
  local k, why = s:resolve_kind(spec)
  if not k and type(spec) == "string" then
    local ok, r = pcall(s._kind, s, spec)
    if ok then k = r end
  end
  if not k then error(guard.where() .. (what and what .. ": " or "") .. tostring(why), 0) end
  return k
end

-- The kinds a definition names: its resource, owns and watches.
local function def_kinds(def)
  local out = { def.convert == nil and { "resource", def.resource } or nil } -- (a conversion's is group/Kind)
  for _, k in ipairs(type(def.owns) == "table" and def.owns or {}) do
    out[#out + 1] = { "owns", type(k) == "table" and k[1] or k } -- ("v1/Pod", or { "v1/Pod", filter = ... })
  end
  for _, w in ipairs(type(def.watches) == "table" and def.watches or {}) do
    out[#out + 1] = { "watches", type(w) == "table" and (w[1] or w.kind) or w }
  end
  return out
end

-- Seconds since the epoch of an RFC 3339 time (or seconds).
local function seconds(t)
  if type(t) == "number" then return t end
  local s, err = time.parse(t)
  if not s then error("time: " .. err, 3) end
  return s
end

-- The transport luaop's client, Events and informers use, served by s:
-- each request yields once, as a real one does (so a watch map that calls
-- the API server fails as it would in a cluster). Requests the test makes
-- itself (as_test's task) are noted, so that env:actions() leaves them out.
local function install(env)
  local s = env.server
  local saved = { request = api.request, start = api.start, watch = api.watch, info = api.info }
  env.saved = saved
  local function serve(spec)
    -- the test's own request (made by the task as_test started) fails only
    -- as env:fail{test = true} rules say
    local mine = env.test_task and coroutine.running() == env.test_task
    local rules = s.rules
    if mine then
      local own = {}
      for _, r in ipairs(rules) do
        if r.test then own[#own + 1] = r end
      end
      s.rules = own
    end
    local ok, status, text = pcall(s.request, s, spec.method, spec.path, spec.body, spec.content_type, spec.accept)
    if mine then
      s.rules = rules
      for i = #rules, 1, -1 do
        if rules[i].times <= 0 then table.remove(rules, i) end
      end
    end
    if not ok then error(status, 0) end
    if mine then env.test_actions[#s.log] = true end
    -- (progress, for the livelock bound: a create or a delete served)
    if (spec.method == "POST" or spec.method == "DELETE") and status < 300 then env.progress = env.progress + 1 end
    return status, text
  end
  api.request = function(spec)
    core.task.sleep(0)
    return serve(spec)
  end
  api.start = function(spec)
    local status, text = serve(spec)
    return {
      wait = function() core.task.sleep(0) return status, text end,
      cancel = function() end,
    }
  end
  api.watch = function(spec) return s:watch(spec.path, spec.accept) end
  api.info = function() return { server = "https://luaop.test", namespace = env.namespace } end
  client.forget_discovery()
end

-- A new environment, started: the clock set, the API server seeded, the
-- scripts loaded and their caches synced, and everything run until idle.
function M.env(opts)
  checks.keys(opts, checks.ENV, "testing.env")
  opts = opts or {}
  if current then current:stop() end
  local env = setmetatable({ namespace = opts.namespace or "default", test_actions = {}, scripts = {},
    max_reconciles = opts.max_reconciles, progress = 0, reconcilers = {}, metric_base = kit_metrics.base() }, Env)
  kit.virtual_clock(seconds(opts.time or M.START))
  events.reset()
  env.server = apiserver.new { now = core.task.wall }
  install(env)
  -- the log lines of Lua code (the scripts', the controllers'), kept for
  -- env:logs(); written too with LUAOP_TEST_LOG set
  local write, verbose = core.log.write, os.getenv("LUAOP_TEST_LOG")
  env.logged, env.saved.log_write = {}, write
  core.log.write = function(...)
    local level, logger, msg, fields = ...
    checks.log_args(select("#", ...), level, logger, msg, fields) -- (what the C one refuses, refused)
    env.logged[#env.logged + 1] = { level = level, logger = logger, msg = msg, fields = fields or {} }
    if verbose then write(level, logger, msg, fields) end
  end
  current = env
  guard.env_started(env, opts.deadline)
  env.manager = manager.new()
  env.manager.idle_gc = false -- (luaop.collector: wall-clock seconds, not the kit's)
  local ok, err = pcall(function()
    for _, path in ipairs(type(opts.manifests) == "string" and { opts.manifests } or opts.manifests or {}) do
      for _, file in ipairs(paths.yaml_files(paths.resolve(path))) do
        for _, doc in ipairs(paths.documents(file)) do env:seed(doc.text or doc.object, doc.kind) end
      end
    end
    for _, obj in ipairs(opts.objects or {}) do env:seed(obj) end
    local scripts = type(opts.scripts) == "string" and { opts.scripts } or opts.scripts or {}
    if opts.script then table.insert(scripts, 1, opts.script) end
    for _, path in ipairs(scripts) do env:load(path) end
    local started, serr = pcall(in_task, function() env.manager:start() end)
    if not started then
      -- the caches that never synced (a LIST the API server keeps refusing)
      local waiting = {}
      for _, e in pairs(env.manager.informers) do
        if e.running and not e.inf.synced then waiting[#waiting + 1] = e.kind end
      end
      table.sort(waiting)
      if #waiting > 0 then serr = ("%s (the caches of %s never synced: see env:logs())"):format(serr,
        table.concat(waiting, ", ")) end
      error(serr, 0)
    end
  end)
  if not ok then
    env:stop() -- the transport and the clock back, whatever failed
    error(err, 0)
  end
  return env
end

-- Put an object in the API server as it is (a CRD is served at once), with
-- no action logged and nothing run: for the state a test starts from.
function Env:seed(obj, kind)
  if (kind or obj.kind) == "CustomResourceDefinition" then
    self.server:add_crd(obj, true)
  else
    self.server:seed(obj, true)
  end
end

-- Load (or reload) a script as luaop does: in its sandbox, under the load
-- budget; its controllers replace the ones it had. text: the script's
-- source (default: the file's).
function Env:load(path, text)
  if not text then path = paths.resolve(path) end
  text = text or paths.read(path)
  local defs, owner = in_task(function()
    local d, err = script.load(path, text)
    if not d then error(guard.trim(err), 0) end
    return d, err
  end)
  -- a kind the API server does not serve is an error now, not a cache that
  -- never syncs
  for _, def in ipairs(defs) do
    for _, nk in ipairs(def_kinds(def)) do
      local ok, kerr = pcall(resolve_kind, self.server, nk[2], ("%s: %s: %s %q"):format(path,
        def.name and "controller " .. def.name or "webhook", nk[1], tostring(nk[2])))
      if not ok then
        in_task(function() owner:stop() end)
        error(kerr, 0)
      end
    end
  end
  in_task(function()
    local d = defs
    local ok, serr = self.manager:set(path, d, owner)
    if not ok then
      owner:stop()
      error(serr, 0)
    end
    return d
  end)
  self.scripts[path] = defs
  for _, def in ipairs(defs) do
    if def.reconcile then self.reconcilers[def.reconcile] = def.name end -- (guard: requeue_after(0))
  end
  return defs
end

Env.metric = kit_metrics.metric -- env:metric(name [, labels]): a sample of /metrics
Env.admit, Env.convert = require("luaop.testing.webhooks").admit, require("luaop.testing.webhooks").convert
-- Run until idle, the clock standing still.
function Env:run()
  guard.run(self)
end

-- Let `secs` seconds pass: the clock moves to each time something is due
-- on the way (a requeue_after, a backoff, a sleep), runs it until idle,
-- and ends at now + secs (a number of seconds, or a duration: "10m").
function Env:advance(secs)
  if type(secs) == "string" then secs = kit.duration(secs) or secs end
  if type(secs) ~= "number" or not (secs >= 0 and secs <= 100 * 365 * 86400) then
    error(("%senv:advance needs a number of seconds from 0 to 100 years, or a duration such as \"10m\", got %s")
      :format(guard.where(), type(secs) == "string" and ("%q"):format(secs) or tostring(secs)), 0)
  end
  self.advance_counts = nil
  guard.run(self)
  local left = secs
  self.advance_counts = {} -- the reconciles on the way, by controller and key
  for _ = 1, M.MAX_STEPS do
    local due = kit.next_due()
    -- (what comes due within a microsecond of the end is due at the end:
    -- seconds as doubles round differently on the way)
    if due == nil or due > left + M.EPSILON then
      kit.advance(left)
      guard.run(self)
      self.advance_counts = nil
      return
    end
    local step = guard.step(due, left)
    kit.advance(step)
    left = math.max(left - step, 0)
    guard.run(self)
  end
  local top, n = guard.busiest(self.advance_counts)
  self.advance_counts = nil
  error(("%sstill something due at every step after %d steps, %g s short of the end%s"):format(guard.where(),
    M.MAX_STEPS, left, top and (": %s reconciled %d times on the way (a reconcile that requeues at once, for ever?)")
      :format(guard.named(top), n) or " (a task that sleeps a moment, for ever?)"), 0)
end

-- The clock: seconds since the epoch, and as Kubernetes writes it.
function Env:now() return core.task.wall() end
function Env:time() return time.format(core.task.wall()) end

-- The test's own client calls, as a user with kubectl: each runs, then the
-- operators react until idle. Results as the client's (object | nil, err).
local function as_test(self, verb, ...)
  local c = client.default()
  -- a kind the API server does not serve: at once, as what it is
  local kind = ...
  if type(kind) == "table" and type(kind.kind) == "string" then
    kind = type(kind.apiVersion) == "string" and kind.apiVersion .. "/" .. kind.kind or kind.kind
  end
  if type(kind) == "string" then resolve_kind(self.server, kind, "env:" .. verb) end
  return in_task(function(...)
    self.test_task = coroutine.running()
    return c[verb](c, ...)
  end, ...)
end

for _, verb in ipairs { "create", "update", "update_status", "apply" } do
  Env[verb] = function(self, ...) return as_test(self, verb, ...) end
end

-- (kind, name_or_req [, namespace]) as ctx takes it, as the client's
-- (kind, {namespace =, name =}).
local function target(form, name, ns)
  if ns == nil then return name end
  if type(ns) ~= "string" then error(guard.where() .. form .. ": namespace must be a string", 0) end
  if type(name) == "table" then
    error(guard.where() .. form .. ": a request names its namespace: no third argument", 0)
  end
  return { namespace = ns, name = name }
end

-- env:delete(kind, name_or_req [, namespace] [, opts]) and
-- env:patch(kind, name_or_req [, namespace], patch [, opts]): ctx's order.
function Env:delete(kind, name, ns, opts)
  if type(ns) == "table" and opts == nil then ns, opts = nil, ns end
  return as_test(self, "delete", kind, target("env:delete(kind, name_or_req [, namespace] [, opts])", name, ns), opts)
end
function Env:patch(kind, name, ns, patch, opts)
  if type(ns) ~= "string" or ns:match("^%s*[%[{]") then ns, patch, opts = nil, ns, patch end
  return as_test(self, "patch", kind, target("env:patch(kind, name_or_req [, namespace], patch [, opts])", name, ns),
    patch, opts)
end

-- Reads straight from the API server (no action logged): an object or nil,
-- in ctx:get's order (kind, name [, namespace]) or (kind, {namespace =, name
-- =}); a namespaced kind's namespace defaults to the env's. Lists of
-- objects, optionally only those whose labels match `labels`.
function Env:get(kind, name, namespace)
  local k = resolve_kind(self.server, kind, "env:get")
  if type(name) == "table" then name, namespace = name.name, name.namespace end
  if type(name) ~= "string" then error(guard.where() .. "env:get(kind, name [, namespace]): a name is required", 0) end
  if k.namespaced then
    return self.server:get(kind, namespace or self.namespace, name)
  end
  return self.server:get(kind, name)
end

function Env:list(kind, namespace, labels)
  resolve_kind(self.server, kind, "env:list")
  local out = {}
  for _, o in ipairs(self.server:objects(kind)) do
    local md = o.metadata
    local ok = namespace == nil or md.namespace == namespace
    for k, v in pairs(labels or {}) do
      if not md.labels or md.labels[k] ~= v then ok = false end
    end
    if ok then out[#out + 1] = o end
  end
  table.sort(out, function(a, b)
    local ka = (a.metadata.namespace or "") .. "/" .. a.metadata.name
    return ka < (b.metadata.namespace or "") .. "/" .. b.metadata.name
  end)
  return out
end

-- What the operators asked of the API server, in order (the test's own
-- requests left out), as client-go's fake Actions(): each {verb, kind,
-- resource, namespace, name, subresource, object}. filter: fields an
-- action must have (verb = "create", kind = "Pod", ...); reads are left
-- out unless filter.reads.
function Env:actions(filter)
  checks.keys(filter, checks.ACTION, "env:actions")
  filter = filter or {}
  checks.verb(filter.verb, "env:actions")
  -- (only those kept are copied)
  return self.server:actions(1, function(i, a)
    local keep = not self.test_actions[i] and (filter.reads or (a.verb ~= "get" and a.verb ~= "list"
      and a.verb ~= "watch"))
    for k, v in pairs(filter) do
      if k ~= "reads" and a[k] ~= v then keep = false end
    end
    return keep
  end)
end

-- Forget the actions so far (asserting on what the next step does).
function Env:clear_actions()
  self.server:clear_actions()
  self.test_actions = {}
end

-- Make the next matching requests of the scripts fail (luaop.testing.apiserver's
-- fail): verb, kind or resource, namespace, name, subresource, reason
-- (Conflict, ...), times (default 1); test = true: the test's own requests
-- too.
function Env:fail(spec)
  if type(spec) ~= "table" then error(guard.where() .. "env:fail needs a table", 0) end
  checks.keys(spec, checks.RULE, "env:fail")
  checks.verb(spec.verb, "env:fail")
  checks.reason(spec.reason, "env:fail")
  if spec.kind then resolve_kind(self.server, spec.kind, "env:fail") end
  return self.server:fail(spec)
end

-- Hold back what the operators' watches whose path `match` picks (a Lua
-- pattern, or a function(path) -> boolean) would see from now on, until
-- release_watches() (luaop.testing.apiserver's hold_watches): one informer's cache
-- lagging another's, as the watches of a real API server may.
function Env:hold_watches(match)
  self.server:hold_watches(match)
end

-- The held changes delivered, in order; then the operators react, until idle.
function Env:release_watches()
  self.server:release_watches()
  guard.run(self)
end

-- The Events recorded about an object (events.k8s.io/v1), oldest first:
-- each {type, reason, note, action}; obj: an object or nil for all.
function Env:events(obj)
  local out = {}
  local all = self:list("events.k8s.io/v1/Event")
  table.sort(all, function(a, b)
    return tonumber(a.metadata.resourceVersion) < tonumber(b.metadata.resourceVersion)
  end)
  for _, e in ipairs(all) do
    local r = e.regarding or {}
    if not obj or (r.name == obj.metadata.name and r.namespace == obj.metadata.namespace and r.kind == obj.kind) then
      out[#out + 1] = { type = e.type, reason = e.reason, note = e.note, action = e.action,
        count = e.series and e.series.count or 1 }
    end
  end
  return out
end

-- The log lines so far, each {level, logger, msg, fields}, oldest first;
-- filter: fields a line must have (msg as a pattern).
function Env:logs(filter)
  local out = {}
  for _, l in ipairs(self.logged) do
    local keep = true
    for k, v in pairs(filter or {}) do
      if k == "msg" then keep = keep and l.msg:find(v) ~= nil else keep = keep and l[k] == v end
    end
    if keep then out[#out + 1] = l end
  end
  return out
end

-- Stop the controllers and give the transport back.
function Env:stop()
  if self.stopped then return end
  self.stopped = true
  self.stopping = true
  pcall(in_task, function()
    self.manager:stop(0)
    -- and what the scripts started ends with them (not in a later test)
    for _, owner in pairs(self.manager.owners) do owner:stop() end
    for owner in pairs(self.manager.retiring) do owner:stop() end
  end)
  core.log.write = self.saved.log_write
  self.saved.log_write = nil
  for k, f in pairs(self.saved) do api[k] = f end
  client.forget_discovery()
  kit.real_clock()
  if current == self then current = nil end
end

return M
