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

-- The instruction budget of one reconcile, unless a definition says
-- `instructions = N`: about a second of pure Lua.
M.DEFAULT_INSTRUCTIONS = 100000000

local Definition = {}
Definition.__index = Definition

local function check(def)
  if type(def) ~= "table" then error("a controller definition is a table", 3) end
  if type(def.name) ~= "string" or def.name == "" then error("a controller needs a name", 3) end
  if type(def.resource) ~= "string" then error(("controller %s needs a resource (the kind it reconciles)"):format(def.name), 3) end
  if type(def.reconcile) ~= "function" then error(("controller %s needs a reconcile function"):format(def.name), 3) end
  for _, k in ipairs(def.owns or {}) do
    if type(k) ~= "string" then error(("controller %s: owns lists kinds"):format(def.name), 3) end
  end
  for _, w in ipairs(def.watches or {}) do
    if type(w) ~= "table" or type(w[1]) ~= "string" or type(w.map) ~= "function" then
      error(("controller %s: each watch is { kind, map = function(obj) return requests end }"):format(def.name), 3)
    end
  end
  if def.instructions ~= nil and (math.type(def.instructions) ~= "integer" or def.instructions < 1) then
    error(("controller %s: instructions must be an integer >= 1"):format(def.name), 3)
  end
  if def.concurrency ~= nil and (math.type(def.concurrency) ~= "integer" or def.concurrency < 1) then
    error(("controller %s: concurrency must be an integer >= 1"):format(def.name), 3)
  end
end

-- Validate and mark a definition.
function M.define(def)
  check(def)
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

-- The informer cache for a kind, if the manager runs one.
function Ctx:cache(kind)
  return self.manager:cache_for(kind, self.namespace_scope)
end

-- get(kind, req_or_name [, namespace]): from the cache when the kind is
-- watched (never yields), else from the API server. nil when gone.
function Ctx:get(kind, req, ns)
  local name = type(req) == "table" and req.name or req
  ns = type(req) == "table" and req.namespace or ns
  local inf = self:cache(kind)
  if inf then
    if ns and ns ~= "" then return inf:get(ns, name) end
    return inf:get(name)
  end
  return self.client:get(kind, name, ns)
end

-- list(kind [, opts]): cached objects (opts.namespace, opts.labels = {k = v},
-- opts.filter = function), or a LIST when the kind is not watched.
function Ctx:list(kind, opts)
  opts = opts or {}
  local inf = self:cache(kind)
  if not inf then
    local list, err = self.client:list(kind, opts)
    return list and list.items, err
  end
  return inf:list(function(o)
    local md = o.metadata
    if opts.namespace and md.namespace ~= opts.namespace then return false end
    for k, v in pairs(opts.labels or {}) do
      if not md.labels or md.labels[k] ~= v then return false end
    end
    return not opts.filter or opts.filter(o)
  end)
end

for _, verb in ipairs { "create", "update", "update_status", "patch", "apply", "delete" } do
  Ctx[verb] = function(self, ...) return self.client[verb](self.client, ...) end
end

-- ---- the manager ----------------------------------------------------------------

local Manager = {}
Manager.__index = Manager

function M.manager(opts)
  opts = opts or {}
  return setmetatable({
    client = opts.client or luaop.client(), informers = {}, by_kind = {}, controllers = {},
    log = luaop.logger("manager"),
  }, Manager)
end

-- One informer per kind + namespace + selector, shared.
function Manager:informer(kind, opts)
  opts = opts or {}
  local id = table.concat({ kind, opts.namespace or "", opts.label_selector or "" }, "|")
  local inf = self.informers[id]
  if not inf then
    inf = informer.new(kind, { namespace = opts.namespace, label_selector = opts.label_selector, client = self.client })
    self.informers[id] = inf
    local k = kind_name(kind)
    self.by_kind[k] = self.by_kind[k] or {}
    table.insert(self.by_kind[k], { spec = kind, inf = inf, selector = opts.label_selector })
  end
  return inf
end

function Manager:cache_for(kind, namespace)
  local found = self.by_kind[kind_name(kind)]
  if not found then return nil end
  for _, e in ipairs(found) do
    -- a selector-scoped cache holds only part of the kind
    if not e.selector and (e.spec == kind or not kind:find("/", 1, true)) then return e.inf end
  end
  return nil
end

local function split_key(k)
  local ns, name = k:match("^([^/]*)/(.*)$")
  if ns then return ns, name end
  return nil, k
end

function Manager:add(def)
  def = M.is_definition(def) and def or M.define(def)
  local c = {
    def = def, queue = core.workqueue.new(), wake = core.task.cond(), tick = core.task.cond(),
    log = luaop.logger("controller." .. def.name), reconciles = 0, errors = 0, active = 0,
  }
  self.controllers[#self.controllers + 1] = c
  local function enqueue(key)
    c.queue:add(key)
    c.wake:signal()
  end
  c.enqueue = enqueue
  local scope = { namespace = def.namespace }
  local primary = self:informer(def.resource, { namespace = def.namespace, label_selector = def.label_selector })
  primary:on {
    add = function(o) enqueue(informer.key(o)) end,
    update = function(_, o) enqueue(informer.key(o)) end,
    delete = function(o) enqueue(informer.key(o)) end,
  }
  -- owned kinds: an event on an object enqueues its controller owner
  local owner_kind = kind_name(def.resource)
  local function owner(o)
    for _, ref in ipairs(o.metadata.ownerReferences or {}) do
      if ref.controller and ref.kind == owner_kind then
        local ns = o.metadata.namespace
        enqueue(ns and ns ~= "" and (ns .. "/" .. ref.name) or ref.name)
      end
    end
  end
  for _, kind in ipairs(def.owns or {}) do
    self:informer(kind, scope):on { add = owner, update = function(old, o) owner(old); owner(o) end, delete = owner }
  end
  -- watched kinds: the map function names the requests
  for _, w in ipairs(def.watches or {}) do
    local function map(o)
      for _, req in ipairs(w.map(o) or {}) do
        enqueue(req.namespace and req.namespace ~= "" and (req.namespace .. "/" .. req.name) or req.name)
      end
    end
    self:informer(w[1], { namespace = w.namespace, label_selector = w.label_selector })
      :on { add = map, update = function(_, o) map(o) end, delete = map }
  end
  return c
end

function Manager:reconcile_one(c, key)
  local ns, name = split_key(key)
  local req = { namespace = ns, name = name }
  local ctx = setmetatable({
    manager = self, client = self.client, namespace_scope = c.def.namespace,
    log = c.log:with { namespace = ns, name = name },
  }, Ctx)
  c.reconciles = c.reconciles + 1
  c.active = c.active + 1
  -- its own task, with an instruction budget: a runaway loop fails only
  -- this reconcile
  local ok, res = core.task.spawn_limited(c.def.instructions or M.DEFAULT_INSTRUCTIONS, c.def.reconcile, ctx, req):wait()
  c.active = c.active - 1
  if not ok then
    c.errors = c.errors + 1
    c.log:error("Reconciler error", { namespace = ns, name = name, error = res })
    c.queue:add_rate_limited(key)
    c.tick:signal()
  elseif type(res) == "table" and res.requeue_after then
    c.queue:forget(key)
    c.queue:add_after(key, res.requeue_after)
    c.tick:signal()
  elseif type(res) == "table" and res.requeue then
    c.queue:add_rate_limited(key)
    c.tick:signal()
  else
    c.queue:forget(key)
  end
  c.queue:done(key)
  if c.queue:stats().depth > 0 then c.wake:signal() end
end

local function worker(self, c)
  while not self.stopping do
    local key = c.queue:get()
    if key then
      self:reconcile_one(c, key)
    else
      c.wake:wait()
    end
  end
end

-- Moves delayed keys into the queue when their time comes.
local function ticker(self, c)
  while not self.stopping do
    c.queue:tick()
    if c.queue:stats().depth > 0 then c.wake:signal() end
    local due = c.queue:next_ready()
    if due then
      -- sleep until the next key is due; at most 0.25 s, in case an earlier
      -- delay is added meanwhile
      luaop.sleep(math.min(math.max(due - luaop.now(), 0), 0.25))
    else
      c.tick:wait()
    end
  end
end

-- Start the informers, wait for their caches, then the workers.
function Manager:start()
  for _, inf in pairs(self.informers) do inf:start() end
  for _, inf in pairs(self.informers) do inf:wait_synced() end
  self.log:info("caches synced", {})
  for _, c in ipairs(self.controllers) do
    local n = c.def.concurrency or 1
    c.log:info("Starting workers", { ["worker count"] = n })
    for _ = 1, n do luaop.spawn(worker, self, c) end
    luaop.spawn(ticker, self, c)
  end
end

-- Stop: no new work; in-flight reconciles finish, for at most `timeout`
-- seconds. Returns whether they all did.
function Manager:stop(timeout)
  self.stopping = true
  for _, inf in pairs(self.informers) do inf:stop() end
  for _, c in ipairs(self.controllers) do
    c.queue:shutdown()
    c.wake:signal()
    c.tick:signal()
  end
  local deadline = luaop.now() + (timeout or 30)
  while true do
    local active = 0
    for _, c in ipairs(self.controllers) do active = active + c.active end
    if active == 0 then return true end
    if luaop.now() > deadline then
      self.log:error("reconciles still running at the end of the drain", { active = active })
      return false
    end
    luaop.sleep(0.05)
  end
end

-- Run definitions (one, or a list) until SIGTERM or SIGINT, then drain.
function M.run(defs)
  local m = M.manager()
  if M.is_definition(defs) then defs = { defs } end
  for _, d in ipairs(defs) do m:add(d) end
  local shutdown = core.task.shutdown()
  m:start()
  shutdown:wait()
  m.log:info("stopping: waiting for running reconciles", {})
  m:stop(30)
  m.log:info("stopped", {})
end

return M
