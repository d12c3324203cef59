-- luaop.worker - a controller's workers and resyncer: workers take keys
-- from the work queue as they become ready (woken by its timer in C), run
-- each reconcile in a task of its own under the definition's budgets, and
-- requeue as it asks (or with backoff when it raised); the resyncer queues
-- every object again each `resync` period.
local core = require "luaop.core"
local time = require "luaop.time"
local definition = require "luaop.definition"
local context = require "luaop.context"
local plan = require "luaop.plan"
local split_key = plan.split_key
local events = require "luaop.events"
local supervisor = require "luaop.supervisor"
local retry = require "luaop.retry"
local finalizer = require "luaop.finalizer"

local M = {}

-- controller-runtime's per-controller metrics (its
-- pkg/internal/controller/metrics), in the runtime's registry, charged to
-- owner (the controller's metrics owner, under its script's account). A
-- series the registry refuses (the script's account at its cap) records
-- nothing; m.refused says why.
function M.metrics(name, owner)
  local m
  local function s(family, values)
    local series, why = core.metrics.series(family, values, owner)
    if why and not m.refused then m.refused = why end
    return series
  end
  m = { result = {} }
  m.time = s("controller_runtime_reconcile_time_seconds", { name })
  m.errors = s("controller_runtime_reconcile_errors_total", { name })
  m.panics = s("controller_runtime_reconcile_panics_total", { name })
  m.workers = s("controller_runtime_max_concurrent_reconciles", { name })
  m.active = s("controller_runtime_active_workers", { name })
  m.terminal = s("controller_runtime_terminal_reconcile_errors_total", { name }) -- (luaop.retry)
  for _, r in ipairs { "success", "error", "requeue", "requeue_after" } do
    m.result[r] = s("controller_runtime_reconcile_total", { name, r })
  end
  m.budget = function(kind)
    return s("luaop_budget_exceeded_total", { name, kind })
  end
  return m
end

-- Budgets a failure can name (sched_failure): counted as breaches.
local budgets = { instructions = true, memory = true, pattern = true, watchdog = true }

-- Every object of c's primary cache into its queue.
function M.requeue_all(c, rate_limited)
  if not c.primary or not c.def.reconcile then return end -- stopped, or handlers only
  for key in pairs(c.primary.inf.store) do
    if rate_limited then c.queue:add_rate_limited(key) else c.queue:add(key) end
  end
end

-- reconcile(ctx, req) in its task, and what it returned read there, raw
-- (under its budget: a metatable on the result runs no code outside it),
-- as nothing, {requeue_after = seconds} or {requeue = true}; anything else
-- fails the reconcile, saying what it was.
function M.reconcile(reconcile, ctx, req)
  local r = reconcile(ctx, req)
  if r == nil then return nil end
  local terminal = retry.returned(r) -- return luaop.terminal(message)
  if terminal then return terminal end
  local after = type(r) == "table" and rawget(r, "requeue_after")
  if after ~= nil and after ~= false then
    if type(after) ~= "number" or after ~= after or after < 0 then
      error(("reconcile returned requeue_after = %s: a number of seconds >= 0 is needed"):format(
        type(after) == "number" and tostring(after) or type(after)), 0)
    end
    return { requeue_after = after }
  end
  if type(r) == "table" and rawget(r, "requeue") then return { requeue = true } end
  if type(r) == "table" and next(r) == nil then return nil end
  error(("reconcile returned a %s: return nothing, luaop.requeue_after(seconds), luaop.requeue() or "
    .. "luaop.terminal(message)"):format(type(r)), 0)
end

-- The test kit's count of reconciles (luaop.testing: a livelock is many of
-- one key while its clock stands still): on_reconcile(controller, key).
M.on_reconcile = nil

-- A reconcile's error that names no line of its script (raised at level 2
-- by a call in a `return`, a tail call whose frame is gone, so naming
-- luaop's own line; or of luaop's making: what reconcile returned) put at
-- the reconcile's own line, saying whose: "op.lua:12: (controller x's
-- reconcile) requeue_after needs ...".
local function located(c, f, text)
  local ok, line, source = pcall(core.check.line, f)
  if not ok or type(source) ~= "string" or source:sub(1, 1) ~= "@" then return text end
  local file = source:sub(2)
  if text:sub(1, #file + 1) == file .. ":" then return text end
  local inner = text:match("^lua/luaop/[%w_/]+%.lua:%d+: (.*)$") or text:match("^%./lua/luaop/[%w_/]+%.lua:%d+: (.*)$")
  if not inner and text:match("^[^\n]-%.lua:%d+: ") then return text end -- another file of the script's: its line
  return ("%s:%d: (controller %s's reconcile) %s"):format(file, line, c.name, inner or text)
end

-- (h: the key's hash when sharded, which marks the reconcile's task for
-- the fence by range: luaop.shard)
local function reconcile_one(self, c, key, h)
  local def = c.def -- this reconcile runs the code it started with
  if M.on_reconcile then M.on_reconcile(c.name, key) end
  local ns, name = split_key(key)
  local req = { namespace = ns, name = name }
  local ctx = context.new {
    manager = self, client = self.client, controller = c, request = key,
    log = c.log:with { namespace = ns, name = name },
  }
  local m = c.metrics
  c.reconciles = c.reconciles + 1
  c.active = c.active + 1
  m.active:set(c.active)
  -- its own task, with budgets: a runaway loop or allocation fails only
  -- this reconcile
  local b = definition.budgets(def)
  local t0 = core.task.now()
  -- counted against the tasks of its script's version (that version's
  -- tasks are not stopped while it runs: Manager:retire_owner)
  local owner = self.owners[c.script]
  local mark = {}
  if h then
    c.shard_active = c.shard_active or {}
    c.shard_active[mark] = h -- (a release of its range waits for it)
  end
  local task = core.task.spawn_limited({ instructions = b.instructions, memory = b.memory,
    name = ("reconcile %s %s"):format(def.name, key), owner = owner, shard = h }, finalizer.run, M.reconcile, def,
    ctx, req, self.client)
  -- (counted once spawned: a spawn that raised counts nothing; nothing
  -- else runs between the spawn and this line but the task itself)
  self:owner_started(owner)
  local ok, res, why = task:wait()
  if h then c.shard_active[mark] = nil end
  self:owner_ended(owner)
  m.time:observe(core.task.now() - t0)
  c.active = c.active - 1
  m.active:set(c.active)
  self.idle:signal()
  local result = "success"
  if not ok and type(res) == "string" then res = located(c, def.reconcile, res) end
  local terminal = retry.terminal_text(ok, res, why)
  if terminal then
    result = "error" -- not retried (luaop.retry)
    retry.failed(c, key, ns, name, ok and located(c, def.reconcile, terminal) or terminal)
  elseif not ok then
    -- as controller-runtime counts a panic: an error too; an API error
    -- the reconcile raised is an error only
    result = "error"
    m.errors:add()
    if why ~= "api" then m.panics:add() end
    if budgets[why] then m.budget(why):add() end
    c.errors = c.errors + 1
    -- A Conflict is a normal outcome (the object changed since it was
    -- read): run again from fresh state, saying so at debug level only
    local head = tostring(res):match("^[^\n]*")
    local conflict = why == "api"
      and (head:match("^Conflict %(409%): (.*)") or head:match("^[^:]*:%d+: Conflict %(409%): (.*)"))
    if conflict then
      c.log:debug("Reconcile conflict, retrying", { namespace = ns, name = name, reason = "Conflict",
        message = conflict })
    else
      c.log:error("Reconciler error", { namespace = ns, name = name, error = res })
    end
    -- and a Warning Event on the object, when it is still there
    local obj = not conflict and c.primary and c.primary.inf:get(ns and ns .. "/" .. name or name)
    if obj then
      events.record { regarding = obj, type = "Warning", controller = c.name, script = c.script,
        reason = budgets[why] and "BudgetExceeded" or "ReconcileError",
        note = tostring(res):match("^[^\n]*") }
    end
    c.queue:add_rate_limited(key)
  elseif type(res) == "table" and res.requeue_after then
    result = "requeue_after"
    c.queue:forget(key)
    c.queue:add_after(key, res.requeue_after)
  elseif type(res) == "table" and res.requeue then
    result = "requeue"
    c.queue:add_rate_limited(key)
  else
    c.queue:forget(key)
    if c.shard_uids then c.shard_uids[key] = nil end
  end
  m.result[result]:add()
  c.queue:done(key)
end

-- Takes keys as they become ready: the queue's timer in C moves delayed
-- keys in when they come due and wakes a waiting worker, so nothing polls.
local function worker(self, c)
  while not self.stopping and not c.stopped and c.def.reconcile and c.workers <= (c.def.concurrency or 1) do
    local key = c.queue:take() -- nil: woken to look again
    if key and self.shard then
      -- sharded: only the keys this replica holds (luaop.shard)
      local ours, h = self.shard:ours(c, key)
      if ours then
        reconcile_one(self, c, key, h)
      else
        c.queue:forget(key)
        c.queue:done(key)
        if c.shard_uids then c.shard_uids[key] = nil end
      end
    elseif key then
      reconcile_one(self, c, key)
    end
  end
  c.workers = c.workers - 1
  c.queue:wake() -- the others look again
  return true -- ended by design (luaop.supervisor)
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
      local due = time.monotonic() + period
      while time.monotonic() < due and c.def.resync == period and not c.stopped and not self.stopping do
        c.resync_changed:wait(due - time.monotonic())
      end
      if c.def.resync == period and not c.stopped and not self.stopping then M.requeue_all(c, false) end
    end
  end
end

-- As many workers as the definition's concurrency (extra ones end when
-- they next look for work); the resyncer once.
function M.start_workers(self, c)
  -- (stopping: a worker would end at once, and this loop start it again)
  if self.stopping or c.stopped then return end
  local n = c.def.concurrency or 1
  if not c.running then
    -- a controller of the same name that was stopped may still finish a
    -- reconcile: none of this one's may overlap it
    for _, r in ipairs(self.retired) do
      while r.name == c.name and r.active > 0 do self.idle:wait() end
    end
    c.running = true
    if not c.def.reconcile then
      -- handlers: every object cached so far is an add, then each event
      c.log:info("Starting event handlers", {})
      if c.primary then
        for _, obj in c.primary.inf:each() do
          local ok, err = pcall(plan.deliver, self, c, "on_add", obj)
          if not ok then c.log:error("event handler failed", { event = "add", error = err }) end
        end
      end
      return
    end
    c.log:info("Starting workers", { ["worker count"] = n })
  end
  if not c.def.reconcile then return end
  if not c.resyncing then -- once, whenever it first has a reconcile (a reload may bring one)
    c.resyncing = true
    supervisor.spawn("resyncer", { name = c.name, done = function() return self.stopping or c.stopped end },
      resyncer, self, c)
  end
  c.metrics.workers:set(n)
  while c.workers < n do
    c.workers = c.workers + 1
    supervisor.spawn("worker", { name = c.name, done = function() return self.stopping or c.stopped end },
      worker, self, c)
  end
  c.queue:wake() -- fewer workers wanted: the extra ones end
end

return M
