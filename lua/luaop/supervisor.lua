-- luaop.supervisor - the runtime's long-lived tasks, never dead in silence.
--
-- Every task the runtime keeps for the life of something (an informer's
-- list/watch loop and its dispatcher, a controller's workers and resyncer,
-- the leader elector, the script reloader, the collector) runs under
-- M.spawn: when its function raises, or returns while what it serves has
-- not ended (done() false), the supervisor logs it with its traceback,
-- counts it (luaop_task_restarts_total{task}), and runs it again after a
-- backoff (luaop.backoff: 0.8 s doubling to 30 s, from 0.8 s again after 2
-- quiet minutes). A task that dies M.DEATHS times within M.WINDOW seconds
-- keeps failing: /healthz answers 500 until M.WINDOW seconds pass without
-- a death, and the kubelet restarts the process, as it would a Go operator
-- whose goroutine keeps panicking. Where a restart cannot be correct (the
-- leader elector after losing its lease) the task's own code ends the
-- process instead (luaop.manager).
--
-- The probe and metrics servers are libmicrohttpd's threads, not tasks:
-- nothing of Lua runs there, and a thread that died would take the
-- process with it (libmicrohttpd aborts on its internal errors), so there
-- is nothing for a supervisor to restart; the kubelet's probes are what
-- notices them.
local core = require "luaop.core"
local logging = require "luaop.logging"
local backoff = require "luaop.backoff"

local M = {}

-- Deaths (of any task) within WINDOW seconds that make /healthz fail.
M.DEATHS, M.WINDOW = 5, 600
-- The restarts' backoff (luaop.backoff reads these).
M.MIN_BACKOFF, M.MAX_BACKOFF, M.BACKOFF_RESET = backoff.MIN_BACKOFF, backoff.MAX_BACKOFF, backoff.BACKOFF_RESET

local log = logging.logger("supervisor")
-- (the debug library is not the runtime's to use when scripts run)
-- (and an error value's own __tostring is never run: error_text)
local error_text = require("luaop.client").error_text
local function traceback(e) return core.traceback(error_text(e), 2) end
local deaths = {} -- monotonic times of recent deaths, oldest first
local recovery -- the task that makes /healthz pass again, when one waits

-- Whether the tasks keep failing now (deaths within the window).
function M.failing()
  local now = core.task.now()
  while deaths[1] and deaths[1] < now - M.WINDOW do table.remove(deaths, 1) end
  return #deaths >= M.DEATHS
end

local function died()
  deaths[#deaths + 1] = core.task.now()
  while #deaths > M.DEATHS do table.remove(deaths, 1) end
  if M.failing() then
    core.metrics.healthy(false)
    if not recovery then
      -- healthy again once the window passed with fewer deaths
      recovery = core.task.spawn(function()
        while M.failing() do
          core.task.sleep(deaths[#deaths - M.DEATHS + 1] + M.WINDOW - core.task.now() + 0.01)
        end
        core.metrics.healthy(true)
        recovery = nil
      end)
    end
  end
end

-- Run fn(...) in a task under supervision; returns the task. task: what
-- it is, a label of the metric (a small fixed set: "informer",
-- "dispatcher", "worker", "resyncer", "elector", "reloader",
-- "collector"); opts.name: which one, for the log; opts.done(): true
-- once the task was meant to end (its informer or controller stopped, the
-- process stopping): then an end is no death, and nothing restarts;
-- opts.on_death(err), opts.on_restart(): told (a manager's readiness).
-- fn returns true when it ended by design (a worker of a controller whose
-- concurrency went down); any other return while not done() is a death.
function M.spawn(task, opts, fn, ...)
  local args = table.pack(...)
  local done = opts.done or function() return false end
  return core.task.spawn(function()
    local b = backoff.new(M)
    while true do
      local ok, err = xpcall(fn, traceback, table.unpack(args, 1, args.n))
      if done() or (ok and err == true) then return end
      core.metrics.series("luaop_task_restarts_total", { task }):add()
      local wait = b:next(core.task.now())
      log:error(ok and "a runtime task returned before its end: starting it again"
        or "a runtime task failed: starting it again",
        { task = task, name = opts.name, error = not ok and err or nil, retryIn = wait })
      died()
      if opts.on_death then pcall(opts.on_death, err) end
      -- the wait, ended early when the task is no longer wanted
      local t0 = core.task.now()
      while not done() and core.task.now() - t0 < wait do
        core.task.sleep(math.min(1, wait - (core.task.now() - t0)))
      end
      if done() then return end
      if opts.on_restart then pcall(opts.on_restart) end
    end
  end)
end

return M
