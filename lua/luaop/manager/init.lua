-- luaop.manager - the manager owns the informers (luaop.manager.caches) and
-- the controllers. Controllers come in
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
local core = require "luaop.core"
local time = require "luaop.time"
local logging = require "luaop.logging"
local client = require "luaop.client"
local caches = require "luaop.manager.caches"
local definition = require "luaop.definition"
local plan = require "luaop.plan"
local worker = require "luaop.worker"
local supervisor = require "luaop.supervisor"
local events = require "luaop.events"
local collector = require "luaop.collector"
local retry = require "luaop.retry"
local script_metrics = require "luaop.metrics"
local is_webhook = require("luaop.webhook.definition").is_webhook
local kind_name = definition.kind_name

local M = {}

local Manager = {}
Manager.__index = Manager
for name, f in pairs(caches.methods) do Manager[name] = f end -- its shared informers'

-- How long a reload waits for the caches of new informers.
M.SYNC_TIMEOUT = 30

-- Metric series a script may hold, its controllers' and its reload
-- counts together (docs/metrics.md#who-owns-a-series): about 21 a
-- controller, so some 95 controllers' worth. Beyond it a controller runs
-- without metrics, and says so.
M.SCRIPT_SERIES = 2000

function M.new(opts)
  opts = opts or {}
  return setmetatable({
    client = opts.client or client.default(), informers = {}, by_kind = {}, controllers = {},
    retired = {}, log = logging.logger("manager"), accounts = {},
    owners = {}, owner_active = {}, retiring = {}, -- script -> its owner; owner -> reconciles running; owners to stop
    idle = core.task.cond(), -- signalled when a reconcile ends (the drain and handovers wait on it)
  }, Manager)
end

-- The subscriptions definition def needs, enqueueing into controller c.
function Manager:plan(c, def)
  return plan.plan(self, c, def)
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
      self:update_ready()
    else
      local k = kind_name(e.kind)
      self.by_kind[k] = self.by_kind[k] or {}
      table.insert(self.by_kind[k], e)
    end
  end
end

-- The metrics account of a script: every series made for it (its
-- controllers', its reload counts) is charged to it, at most
-- M.SCRIPT_SERIES, and goes when the script does (drop_account).
function Manager:account(script)
  local a = self.accounts[script]
  if not a then
    a = core.metrics.owner("script " .. script, M.SCRIPT_SERIES)
    self.accounts[script] = a
  end
  return a
end

function Manager:drop_account(script)
  local a = self.accounts[script]
  if a then
    a:drop()
    self.accounts[script] = nil
  end
end

function Manager:new_controller(def, script)
  -- its series: its own owner, under its script's account; they go when
  -- it stops
  local owner = core.metrics.owner("controller " .. def.name, 0, self:account(script))
  local c = {
    name = def.name, script = script, def = def, metrics_owner = owner,
    queue = core.workqueue.new(retry.options(def, { name = def.name, metrics_owner = owner })),
    metrics = worker.metrics(def.name, owner),
    resync_changed = core.task.cond(),
    log = logging.logger("controller." .. def.name), reconciles = 0, errors = 0, active = 0, workers = 0,
  }
  function c.enqueue(key) c.queue:add(key) end
  if c.metrics.refused then
    c.log:error("this controller's metrics are not recorded", { error = c.metrics.refused })
  end
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
  if #fresh > 0 then self:update_ready() end
  local timed_out = false
  if timeout and #fresh > 0 then
    core.task.spawn(function()
      core.task.sleep(timeout)
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

-- Make `script`'s controllers exactly `defs` (see above). true | nil, err;
-- on error nothing changed.
-- Set a script's controllers to defs (none: it is gone). owner: the
-- core.task.owner its top level ran under (script.load), which its
-- reconciles count against too. Once set, the owner of the version it
-- replaces (or of a removed script) is retired: stopped, and with it every
-- task that version left, as soon as none of its reconciles is running
-- (those finish on the old code, as a reload promises).
function Manager:set(script, defs, owner)
  local controllers, hooks = {}, {} -- (the webhooks: luaop.webhook's registry, made for the first)
  for _, d in ipairs(defs) do table.insert(is_webhook(d) and hooks or controllers, d) end
  local reg = (#hooks > 0 or self.registry) and self:webhooks()
  local ok, err = true, nil
  if reg then ok, err = reg:check(script, hooks) end
  if ok then ok, err = self:set_defs(script, controllers) end
  if ok then
    if reg then reg:set(script, hooks) end
    local old = self.owners[script]
    self.owners[script] = #defs > 0 and owner or nil
    if old and old ~= owner then self:retire_owner(old) end
    if #defs == 0 and owner then self:retire_owner(owner) end
    script_metrics.settle(script, #defs > 0) -- the version's own metrics show, or go with it
  end
  return ok, err
end

-- The scripts' webhooks (luaop.webhook), made on first use; its server
-- started by self.webhook_start (luaop.webhook.server: luaop.main sets it)
-- when the first one is set.
function Manager:webhooks()
  self.registry = self.registry or require("luaop.webhook").new { start = self.webhook_start,
    account = function(script) return self:account(script) end }
  return self.registry
end

-- Reconciles running per owner (worker.lua counts them).
function Manager:owner_started(owner)
  if owner then self.owner_active[owner] = (self.owner_active[owner] or 0) + 1 end
end

function Manager:owner_ended(owner)
  if not owner then return end
  local n = self.owner_active[owner] - 1
  self.owner_active[owner] = n > 0 and n or nil
  if n == 0 and self.retiring[owner] then
    self.retiring[owner] = nil
    owner:stop()
  end
end

-- Stop owner's tasks now if none of its reconciles runs, else when the
-- last one ends.
function Manager:retire_owner(owner)
  if self.owner_active[owner] then
    self.retiring[owner] = true
  else
    owner:stop()
  end
end

function Manager:set_defs(script, defs)
  local names = {}
  -- (named by the script, so that a refusal at start says which file)
  local at = script ~= "" and script .. ": " or ""
  for _, d in ipairs(defs) do
    if names[d.name] then return nil, ("%stwo controllers are named %s"):format(at, d.name) end
    local c = self.controllers[d.name]
    if c and c.script ~= script then
      -- (as controller-runtime refuses a second controller of one name)
      return nil, ("%scontroller %s is defined by %s already: controller names must be unique"):format(
        at, d.name, c.script ~= "" and c.script or "the program")
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
      for _, p in ipairs(plans) do -- and the series of controllers that never ran
        if self.controllers[p.c.name] ~= p.c then p.c.metrics_owner:drop() end
      end
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
    if reloaded then retry.tune(c, p.def) end -- its retry policy, every key kept
    c.def, c.subs, c.primary = p.def, p.subs, p.primary
    self.controllers[c.name] = c
    c.reload = reloaded
  end
  self:rewire()
  if self.started and self:leading() then
    for _, p in ipairs(plans) do
      self:start_workers(p.c)
      if changed[p.c] then p.c.resync_changed:signal() end
      worker.requeue_all(p.c, p.c.reload)
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
  c.metrics_owner:drop() -- its series leave /metrics (a reconcile still running updates nothing)
  events.forget(c.name) -- its Event series' last counts written, its keys and buckets gone
  for _, e in pairs(self.informers) do e.inf:release_indexes(c) end -- the label indexes it held
  self.retired[#self.retired + 1] = c
end

-- Compatibility: add one definition (to the anonymous script).
function Manager:add(def)
  def = definition.is_definition(def) and def or definition.define(def)
  local defs = {}
  for _, c in pairs(self.controllers) do
    if c.script == "" then defs[#defs + 1] = c.def end
  end
  defs[#defs + 1] = def
  local ok, err = self:set("", defs)
  if not ok then error(err, 2) end
  return self.controllers[def.name]
end

-- As many workers as the definition's concurrency; the resyncer once.
function Manager:start_workers(c)
  return worker.start_workers(self, c)
end

-- Start the informers, wait for their caches, then the workers.
function Manager:start()
  -- say which caches keep everything waiting (a missing CRD, a Forbidden)
  core.task.spawn(function()
    while not self.started do
      core.task.sleep(30)
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
  -- a quiet process's garbage collected and its pages given back (not
  -- under the test kit's clock, where a second is whatever the test says)
  if self.idle_gc ~= false then collector.start(function() return self.stopping end) end
  self:update_ready() -- /readyz: a warm standby is ready too
  if self:leading() then self:start_leading() end
end

-- /readyz: ready once started (the first sync of every cache), and while
-- every informer a controller needs has synced and runs (not dead, waiting
-- for its supervisor to start it again: luaop.supervisor). A warm standby
-- is ready too.
function Manager:update_ready()
  local ready = self.started == true
  for _, e in pairs(self.informers) do
    if ready and e.running and (not e.inf.synced or e.inf.dead) then ready = false end
  end
  if ready ~= self.ready or (self.started and not self.ready_told) then
    self.ready = ready
    core.metrics.ready(ready)
    if self.started then
      self.ready_told = true
      self.log:info(ready and "ready: every cache synced and running"
        or "not ready: a cache is not synced or not running", {})
    end
  end
end

-- Whether this process may reconcile: always, but under leader election
-- only while it holds the lease.
function Manager:leading()
  return self.elector == nil or self.elector.leading
end

-- The workers of every controller, their queues already filled by caches
-- that synced meanwhile: the first reconcile waits for no LIST.
function Manager:start_leading()
  for _, c in pairs(self.controllers) do
    self:start_workers(c)
    if c.missed then
      worker.requeue_all(c, false)
      c.missed = false
    end
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
  local deadline = time.monotonic() + (timeout or 30)
  local drained = true
  while true do
    local active = 0
    for _, c in ipairs(all) do active = active + c.active end
    if active == 0 then break end
    local left = deadline - time.monotonic()
    if left <= 0 then
      self.log:error("reconciles still running at the end of the drain", { active = active })
      drained = false
      break
    end
    self.idle:wait(left)
  end
  -- the webhook server last, as controller-runtime stops its webhook
  -- servers after the controllers: admission goes on during the drain, and
  -- the requests it is answering finish within the grace left
  if self.registry then
    require("luaop.webhook.server").stop(self.registry, math.max(0, deadline - time.monotonic()))
  end
  script_metrics.clear() -- the scripts' own metrics go, after the drain (a scrape during it still has them)
  return drained
end

-- Run until SIGTERM or SIGINT, then drain for at most `grace` seconds
-- (30 by default, controller-runtime's GracefulShutdownTimeout). Returns
-- false when reconciles were still running at the end.
function Manager:run_until_shutdown(grace)
  grace = grace or 30
  local shutdown = core.task.shutdown()
  local e = self.elector
  if self.shard then
    -- sharding: the ring's membership, as the election's (lost: exit 1)
    local ended = core.task.cond()
    core.task.spawn(function() shutdown:wait() ended:signal() end)
    self.shard:start(function() ended:signal() end)
    shutdown = ended
  end
  if e then
    -- SIGTERM, or the lease lost: whichever comes first ends the wait
    local ended = core.task.cond()
    core.task.spawn(function() shutdown:wait() ended:signal() end)
    -- supervised: an elector that raised runs again (it renews a lease it
    -- holds: the fence still ends at the last renew's deadline); one that
    -- lost the lease ends the process instead (below)
    supervisor.spawn("elector", { name = "leader election",
      done = function() return e.stopped or e.lost end }, function()
      e:run(function() if self.started then self:start_leading() end end, function() ended:signal() end)
    end)
    shutdown = ended
  end
  if not self.started then self:start() end
  shutdown:wait()
  if self.shard and self.shard.member.lost then
    self.log:error("stopping: the shard ring membership was lost", {})
    self.log:info("stopped", core.counters())
    return false, 1
  end
  if e and e.lost then
    -- as controller-runtime: no drain (no write would leave anyway), exit 1
    self.log:error("stopping: the leader lease was lost", {})
    self.log:info("stopped", core.counters())
    return false, 1
  end
  self.log:info("stopping: waiting for running reconciles", { gracePeriod = grace })
  local drained = self:stop(grace)
  -- the Events' series not yet written, then the lease goes, so that a
  -- standby takes over at once
  events.flush(5)
  if e then e:release() end
  if self.shard then self.shard:release() end
  -- with what containment stopped, for whoever reads a log's last lines
  self.log:info("stopped", core.counters())
  return drained
end

return M
