-- luaop.controller - controllers as controller-runtime builds them: a
-- resource (the For), owned kinds whose events enqueue their controller
-- owner, watched kinds with a map function, shared informers, one
-- rate-limited work queue per controller, and `concurrency` workers, each
-- reconcile in a task of its own.
--
-- reconcile(ctx, req) returns nothing (done), luaop.requeue_after(seconds),
-- or luaop.requeue(); raising means "retry with backoff" and is logged with
-- the Lua traceback.
local core = require "luaop.core"
local luaop = require "luaop"
local informer = require "luaop.informer"

local M = {}

-- The budgets of one reconcile, unless a definition says otherwise:
-- `instructions = N` (the default is about a second of pure Lua) and
-- `memory = bytes` or a Kubernetes quantity such as "64Mi" (net growth of
-- the Lua heap while the reconcile runs).
M.DEFAULT_INSTRUCTIONS = 100000000
M.DEFAULT_MEMORY = 64 * 1024 * 1024
-- What a definition may declare at most (--max-instructions, --max-memory):
-- more is cut down to these, with a log line saying so.
M.MAX_INSTRUCTIONS = 1000000000
M.MAX_MEMORY = 1024 * 1024 * 1024

local UNITS = { [""] = 1, k = 1e3, M = 1e6, G = 1e9, Ki = 1 << 10, Mi = 1 << 20, Gi = 1 << 30 }

-- bytes from an integer or a quantity ("64Mi", "500M"); nil when malformed
local function bytes(v)
  if math.type(v) == "integer" then return v >= 1 and v or nil end
  if type(v) ~= "string" then return nil end
  local n, unit = v:match("^(%d+)(%a*)$")
  local mult = n and UNITS[unit]
  return mult and math.tointeger(tonumber(n) * mult) or nil
end

local Definition = {}
Definition.__index = Definition

local function check(def)
  if type(def) ~= "table" then error("a controller definition is a table", 0) end
  if type(def.name) ~= "string" or def.name == "" then error("a controller needs a name", 0) end
  if type(def.resource) ~= "string" then error(("controller %s needs a resource (the kind it reconciles)"):format(def.name), 0) end
  if type(def.reconcile) ~= "function" then error(("controller %s needs a reconcile function"):format(def.name), 0) end
  for _, k in ipairs(def.owns or {}) do
    if type(k) ~= "string" then error(("controller %s: owns lists kinds"):format(def.name), 0) end
  end
  for _, w in ipairs(def.watches or {}) do
    if type(w) ~= "table" or type(w[1]) ~= "string" or type(w.map) ~= "function" then
      error(("controller %s: each watch is { kind, map = function(obj) return requests end }"):format(def.name), 0)
    end
  end
  if def.instructions ~= nil and (math.type(def.instructions) ~= "integer" or def.instructions < 1) then
    error(("controller %s: instructions must be an integer >= 1"):format(def.name), 0)
  end
  if def.concurrency ~= nil and (math.type(def.concurrency) ~= "integer" or def.concurrency < 1) then
    error(("controller %s: concurrency must be an integer >= 1"):format(def.name), 0)
  end
  if def.memory ~= nil and not bytes(def.memory) then
    error(("controller %s: memory must be bytes (an integer >= 1) or a quantity such as \"64Mi\""):format(def.name), 0)
  end
  if def.resync ~= nil and (type(def.resync) ~= "number" or def.resync <= 0) then
    error(("controller %s: resync must be a number of seconds > 0"):format(def.name), 0)
  end
end

-- Validate and mark a definition. (Errors carry no position: the usual
-- `return luaop.controller {...}` is a tail call, which leaves no line of
-- the script to name; loading a script prefixes its path.)
local budgets = setmetatable({}, { __mode = "k" }) -- definition -> a reconcile's budgets

-- A budget a definition declares, cut down to the command line's limit.
local function capped(def, what, v, max, flag)
  if v <= max then return v end
  core.log.write("error", "controller", "a budget above the limit: using the limit", {
    controller = def.name, budget = what, declared = v, limit = max, flag = flag,
  })
  return max
end

function M.define(def)
  check(def)
  budgets[def] = {
    instructions = capped(def, "instructions", def.instructions or M.DEFAULT_INSTRUCTIONS, M.MAX_INSTRUCTIONS,
      "--max-instructions"),
    memory = capped(def, "memory", def.memory and bytes(def.memory) or M.DEFAULT_MEMORY, M.MAX_MEMORY, "--max-memory"),
  }
  return setmetatable(def, Definition)
end

function M.is_definition(v)
  return getmetatable(v) == Definition
end

function M.requeue_after(seconds)
  assert(type(seconds) == "number" and seconds >= 0, "requeue_after needs seconds >= 0")
  return { requeue_after = seconds }
end

function M.requeue()
  return { requeue = true }
end

local function kind_name(spec)
  return spec:match("([^/]+)$")
end

-- ---- the reconcile context --------------------------------------------------

local Ctx = {}
Ctx.__index = Ctx

-- The informer cache that holds every object of `kind` the query asks for
-- (q.namespace, q.label_selector, q.field_selector), if one runs: one with
-- no namespace or the query's, and exactly the query's selectors. Else, for
-- the controller's own kind, its cache, selectors and all (what they leave
-- out reads as absent, as with controller-runtime's cache selectors).
function Ctx:cache(kind, q)
  local inf = self.manager:cache_for(kind, q or {})
  if inf then return inf end
  local p = self.controller and self.controller.primary
  if p and (p.kind == kind or (not kind:find("/", 1, true) and kind_name(p.kind) == kind)) then return p.inf end
  return nil
end

-- get(kind, req_or_name [, namespace]): from the cache when the kind is
-- watched (never yields), else from the API server. nil when gone.
function Ctx:get(kind, req, ns)
  local name = type(req) == "table" and req.name or req
  ns = type(req) == "table" and req.namespace or ns
  if ns == "" then ns = nil end
  local inf = self:cache(kind, { namespace = ns })
  if inf then
    -- a copy: what the reconcile changes is not the cache's until written
    if ns then return luaop.copy(inf:get(ns, name)) end
    return luaop.copy(inf:get(name))
  end
  return self.client:get(kind, name, ns)
end

-- list(kind [, opts]): cached objects (opts.namespace, opts.label_selector
-- and opts.field_selector choose the cache; opts.labels = {k = v} and
-- opts.filter = function(obj) filter it), or a LIST when no cache holds them.
function Ctx:list(kind, opts)
  opts = opts or {}
  local function keep(o)
    local md = o.metadata
    if opts.namespace and md.namespace ~= opts.namespace then return false end
    for k, v in pairs(opts.labels or {}) do
      if not md.labels or md.labels[k] ~= v then return false end
    end
    return not opts.filter or opts.filter(o)
  end
  local inf = self:cache(kind, opts)
  if inf then
    local out = inf:list(keep)
    for i, o in ipairs(out) do out[i] = luaop.copy(o) end
    return out
  end
  local list, err = self.client:list(kind, {
    namespace = opts.namespace, all_namespaces = opts.namespace == nil,
    label_selector = opts.label_selector, field_selector = opts.field_selector,
  })
  if not list then return nil, err end
  local out = {}
  for _, o in ipairs(list.items) do
    if keep(o) then out[#out + 1] = o end
  end
  return out
end

for _, verb in ipairs { "create", "update", "update_status", "patch", "apply", "delete" } do
  Ctx[verb] = function(self, ...) return self.client[verb](self.client, ...) end
end

-- ---- the manager ----------------------------------------------------------------
--
-- The manager owns the informers and the controllers. Controllers come in
-- sets, one set per script: Manager:set(script, defs) makes that script's
-- controllers exactly `defs`, which is how a reload swaps code without
-- dropping caches:
--   - informers whose kind, namespace and selector are unchanged are kept
--     (no LIST); new ones start and must sync first; unused ones stop;
--   - a controller keeps its work queue across versions (so a key is still
--     never reconciled twice at once), and reconciles already running finish
--     on the code they started with; the next one runs the new code;
--   - every object of a reloaded controller is requeued once through its
--     rate-limited queue;
--   - controllers no longer defined stop.

local Manager = {}
Manager.__index = Manager

-- How long a reload waits for the caches of new informers.
M.SYNC_TIMEOUT = 30

function M.manager(opts)
  opts = opts or {}
  return setmetatable({
    client = opts.client or luaop.client(), informers = {}, by_kind = {}, controllers = {},
    retired = {}, log = luaop.logger("manager"),
  }, Manager)
end

local function informer_id(kind, namespace, selector, fields)
  return table.concat({ kind, namespace or "", selector or "", fields or "" }, "|")
end

-- The informer entry for kind + namespace + selector, made (not started)
-- when there is none. One informer feeds every controller subscribed to it.
function Manager:entry(kind, opts)
  opts = opts or {}
  local id = informer_id(kind, opts.namespace, opts.label_selector, opts.field_selector)
  local e = self.informers[id]
  if not e then
    e = {
      id = id, kind = kind, namespace = opts.namespace, label_selector = opts.label_selector,
      field_selector = opts.field_selector, subs = {},
    }
    e.inf = informer.new(kind, {
      namespace = opts.namespace, label_selector = opts.label_selector, field_selector = opts.field_selector,
      client = self.client,
    })
    local function dispatch(event)
      return function(a, b)
        for _, sub in ipairs(e.subs) do
          local f = sub[event]
          if f then
            local ok, err = pcall(f, a, b)
            if not ok then sub.log:error("event handler failed", { event = event, error = tostring(err) }) end
          end
        end
      end
    end
    e.inf:on { add = dispatch("add"), update = dispatch("update"), delete = dispatch("delete") }
    self.informers[id] = e
  end
  return e
end

-- Compatibility: the informer itself.
function Manager:informer(kind, opts)
  return self:entry(kind, opts).inf
end

function Manager:cache_for(kind, q)
  for _, e in ipairs(self.by_kind[kind_name(kind)] or {}) do
    if (e.kind == kind or not kind:find("/", 1, true))
      and (e.namespace == nil or e.namespace == q.namespace)
      and e.label_selector == q.label_selector and e.field_selector == q.field_selector then
      return e.inf
    end
  end
  return nil
end

local function split_key(k)
  local ns, name = k:match("^([^/]*)/(.*)$")
  if ns then return ns, name end
  return nil, k
end

local function req_key(namespace, name)
  return namespace and namespace ~= "" and (namespace .. "/" .. name) or name
end

-- The subscriptions a definition needs: {entry, add, update, delete} each,
-- enqueueing into controller c.
function Manager:plan(c, def)
  local function enqueue(key) c.enqueue(key) end
  local subs = {}
  local function sub(e, on)
    on.entry, on.log = e, c.log
    subs[#subs + 1] = on
  end
  local primary = self:entry(def.resource, {
    namespace = def.namespace, label_selector = def.label_selector, field_selector = def.field_selector,
  })
  sub(primary, {
    primary = true,
    add = function(o) enqueue(informer.key(o)) end,
    update = function(_, o) enqueue(informer.key(o)) end,
    delete = function(o) enqueue(informer.key(o)) end,
  })
  -- owned kinds: an event on an object enqueues its controller owner
  local owner_kind = kind_name(def.resource)
  local function owner(o)
    for _, ref in ipairs(o.metadata.ownerReferences or {}) do
      if ref.controller and ref.kind == owner_kind then enqueue(req_key(o.metadata.namespace, ref.name)) end
    end
  end
  for _, kind in ipairs(def.owns or {}) do
    sub(self:entry(kind, { namespace = def.namespace }),
      { add = owner, update = function(old, o) owner(old); owner(o) end, delete = owner })
  end
  -- watched kinds: the map function names the requests
  -- map(obj, ctx) may read the caches through ctx (get, list); it runs in
  -- the informer's task under the reconcile's instruction budget, so one
  -- that runs away fails (logged by the informer) instead of stalling
  -- luaop. It gets copies, as a reconcile does: the informer is shared
  -- with other controllers, other scripts' among them.
  local map_ctx = setmetatable({ manager = self, client = self.client, log = c.log, controller = c }, Ctx)
  for _, w in ipairs(def.watches or {}) do
    local function map(o)
      local ok, reqs = core.task.call_limited(budgets[def].instructions, w.map, luaop.copy(o), map_ctx)
      if not ok then error(("watch map of %s: %s"):format(w[1], tostring(reqs)), 0) end
      for _, req in ipairs(reqs or {}) do enqueue(req_key(req.namespace, req.name)) end
    end
    sub(self:entry(w[1], { namespace = w.namespace, label_selector = w.label_selector, field_selector = w.field_selector }),
      { add = map, update = function(_, o) map(o) end, delete = map })
  end
  return subs, primary
end

-- Subscriptions from the controllers as they are now; informers nobody
-- subscribes to stop.
function Manager:rewire()
  for _, e in pairs(self.informers) do e.subs = {} end
  for _, c in pairs(self.controllers) do
    for _, sub in ipairs(c.subs) do table.insert(sub.entry.subs, sub) end
  end
  self.by_kind = {}
  for id, e in pairs(self.informers) do
    if #e.subs == 0 then
      if e.running then self.log:info("stopping informer", { kind = e.kind }) end
      e.inf:stop()
      self.informers[id] = nil
    else
      local k = kind_name(e.kind)
      self.by_kind[k] = self.by_kind[k] or {}
      table.insert(self.by_kind[k], e)
    end
  end
end

function Manager:new_controller(def, script)
  local c = {
    name = def.name, script = script, def = def, queue = core.workqueue.new(),
    resync_changed = core.task.cond(),
    log = luaop.logger("controller." .. def.name), reconciles = 0, errors = 0, active = 0, workers = 0,
  }
  function c.enqueue(key) c.queue:add(key) end
  return c
end

-- Start the informers that are not running yet; true and how many once
-- they synced (or were stopped meanwhile), or nil, err when one did not
-- within `timeout` seconds.
function Manager:start_informers(timeout)
  local fresh = {}
  for _, e in pairs(self.informers) do
    if not e.running then
      e.running = true
      e.inf:start()
      fresh[#fresh + 1] = e
    end
  end
  local timed_out = false
  if timeout and #fresh > 0 then
    luaop.spawn(function()
      luaop.sleep(timeout)
      timed_out = true
      for _, e in ipairs(fresh) do e.inf.synced_cond:signal() end
    end)
  end
  for _, e in ipairs(fresh) do
    if not timed_out then e.inf:wait_synced() end
    if not e.inf.synced and not e.inf.stopped then
      return nil, ("the cache of %s did not sync within %g s"):format(e.kind, timeout)
    end
  end
  return true, #fresh
end

-- Every object of c's primary cache into its queue.
local function requeue_all(c, rate_limited)
  if not c.primary then return end -- stopped
  for key in pairs(c.primary.inf.store) do
    if rate_limited then c.queue:add_rate_limited(key) else c.queue:add(key) end
  end
end

-- Make `script`'s controllers exactly `defs` (see above). true | nil, err;
-- on error nothing changed.
function Manager:set(script, defs)
  local names = {}
  for _, d in ipairs(defs) do
    if names[d.name] then return nil, ("two controllers are named %s"):format(d.name) end
    local c = self.controllers[d.name]
    if c and c.script ~= script then
      return nil, ("controller %s is defined by %s already"):format(d.name, c.script)
    end
    names[d.name] = true
  end
  local plans = {}
  for _, d in ipairs(defs) do
    local c = self.controllers[d.name] or self:new_controller(d, script)
    local subs, primary = self:plan(c, d)
    plans[#plans + 1] = { c = c, def = d, subs = subs, primary = primary }
  end
  if self.started then
    local ok, err = self:start_informers(M.SYNC_TIMEOUT)
    if not ok then
      self:rewire() -- stops the informers nobody took
      return nil, err
    end
  end
  for name, c in pairs(self.controllers) do
    if c.script == script and not names[name] then self:stop_controller(c) end
  end
  local changed = {}
  for _, p in ipairs(plans) do
    local c = p.c
    local reloaded = self.controllers[c.name] ~= nil
    -- set during the first sync on an informer already listing: its adds
    -- went to the others; start() queues its objects
    c.missed = not self.started and p.primary.running
    changed[c] = c.def.resync ~= p.def.resync
    c.def, c.subs, c.primary = p.def, p.subs, p.primary
    self.controllers[c.name] = c
    c.reload = reloaded
  end
  self:rewire()
  if self.started then
    for _, p in ipairs(plans) do
      self:start_workers(p.c)
      if changed[p.c] then p.c.resync_changed:signal() end
      requeue_all(p.c, p.c.reload)
    end
  end
  return true
end

function Manager:stop_controller(c)
  local keep = {}
  for _, r in ipairs(self.retired) do
    if r.active > 0 then keep[#keep + 1] = r end
  end
  self.retired = keep
  c.stopped = true
  c.log:info("stopping controller", {})
  c.queue:shutdown() -- its workers' take returns nil
  c.resync_changed:signal()
  self.controllers[c.name] = nil
  c.subs, c.primary = {}, nil -- its caches may go
  self.retired[#self.retired + 1] = c
end

-- Compatibility: add one definition (to the anonymous script).
function Manager:add(def)
  def = M.is_definition(def) and def or M.define(def)
  local defs = {}
  for _, c in pairs(self.controllers) do
    if c.script == "" then defs[#defs + 1] = c.def end
  end
  defs[#defs + 1] = def
  local ok, err = self:set("", defs)
  if not ok then error(err, 2) end
  return self.controllers[def.name]
end

function Manager:reconcile_one(c, key)
  local def = c.def -- this reconcile runs the code it started with
  local ns, name = split_key(key)
  local req = { namespace = ns, name = name }
  local ctx = setmetatable({
    manager = self, client = self.client, controller = c,
    log = c.log:with { namespace = ns, name = name },
  }, Ctx)
  c.reconciles = c.reconciles + 1
  c.active = c.active + 1
  -- its own task, with budgets: a runaway loop or allocation fails only
  -- this reconcile
  local b = budgets[def]
  local ok, res = core.task.spawn_limited({ instructions = b.instructions, memory = b.memory,
    name = ("reconcile %s %s"):format(def.name, key) }, def.reconcile, ctx, req):wait()
  c.active = c.active - 1
  if not ok then
    c.errors = c.errors + 1
    c.log:error("Reconciler error", { namespace = ns, name = name, error = res })
    c.queue:add_rate_limited(key)
  elseif type(res) == "table" and res.requeue_after then
    c.queue:forget(key)
    c.queue:add_after(key, res.requeue_after)
  elseif type(res) == "table" and res.requeue then
    c.queue:add_rate_limited(key)
  else
    c.queue:forget(key)
  end
  c.queue:done(key)
end

-- Takes keys as they become ready: the queue's timer in C moves delayed
-- keys in when they come due and wakes a waiting worker, so nothing polls.
local function worker(self, c)
  while not self.stopping and not c.stopped and c.workers <= (c.def.concurrency or 1) do
    local key = c.queue:take() -- nil: woken to look again
    if key then self:reconcile_one(c, key) end
  end
  c.workers = c.workers - 1
  c.queue:wake() -- the others look again
end

-- `resync = seconds`: every object of the controller is queued again that
-- often (controller-runtime's SyncPeriod), whatever happened meanwhile.
local function resyncer(self, c)
  while not self.stopping and not c.stopped do
    local period = c.def.resync
    if not period then
      c.resync_changed:wait()
    else
      -- until the period is over, or a reload changes it (or the stop)
      local due = luaop.now() + period
      while luaop.now() < due and c.def.resync == period and not c.stopped and not self.stopping do
        c.resync_changed:wait(due - luaop.now())
      end
      if c.def.resync == period and not c.stopped and not self.stopping then requeue_all(c, false) end
    end
  end
end

-- As many workers as the definition's concurrency (extra ones end when
-- they next look for work); the resyncer once.
function Manager:start_workers(c)
  local n = c.def.concurrency or 1
  if not c.running then
    -- a controller of the same name that was stopped may still finish a
    -- reconcile: none of this one's may overlap it
    for _, r in ipairs(self.retired) do
      while r.name == c.name and r.active > 0 do luaop.sleep(0.05) end
    end
    c.running = true
    c.log:info("Starting workers", { ["worker count"] = n })
    luaop.spawn(resyncer, self, c)
  end
  while c.workers < n do
    c.workers = c.workers + 1
    luaop.spawn(worker, self, c)
  end
  c.queue:wake() -- fewer workers wanted: the extra ones end
end

-- Start the informers, wait for their caches, then the workers.
function Manager:start()
  -- say which caches keep everything waiting (a missing CRD, a Forbidden)
  luaop.spawn(function()
    while not self.started do
      luaop.sleep(30)
      for _, e in pairs(self.informers) do
        if e.running and not e.inf.synced and not self.started then
          self.log:error("still waiting for a cache to sync", { kind = e.kind, namespace = e.namespace })
        end
      end
    end
  end)
  -- a reload during the first sync may have added informers: start those too
  repeat local _, n = self:start_informers() until n == 0
  self.started = true
  self.log:info("caches synced", {})
  for _, c in pairs(self.controllers) do
    self:start_workers(c)
    if c.missed then requeue_all(c, false) end
  end
end

-- Stop: no new work; in-flight reconciles finish, for at most `timeout`
-- seconds. Returns whether they all did.
function Manager:stop(timeout)
  self.stopping = true
  for _, e in pairs(self.informers) do e.inf:stop() end
  local all = {}
  for _, c in pairs(self.controllers) do all[#all + 1] = c end
  for _, c in ipairs(self.retired) do all[#all + 1] = c end
  for _, c in ipairs(all) do
    c.queue:shutdown()
    c.resync_changed:signal()
  end
  local deadline = luaop.now() + (timeout or 30)
  while true do
    local active = 0
    for _, c in ipairs(all) do active = active + c.active end
    if active == 0 then return true end
    if luaop.now() > deadline then
      self.log:error("reconciles still running at the end of the drain", { active = active })
      return false
    end
    luaop.sleep(0.05)
  end
end

-- Run until SIGTERM or SIGINT, then drain for at most `grace` seconds
-- (30 by default, controller-runtime's GracefulShutdownTimeout). Returns
-- false when reconciles were still running at the end.
function Manager:run_until_shutdown(grace)
  grace = grace or 30
  local shutdown = core.task.shutdown()
  if not self.started then self:start() end
  shutdown:wait()
  self.log:info("stopping: waiting for running reconciles", { gracePeriod = grace })
  local drained = self:stop(grace)
  -- with what containment stopped, for whoever reads a log's last lines
  self.log:info("stopped", core.counters())
  return drained
end


return M
