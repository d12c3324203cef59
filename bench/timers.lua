-- bench/timers.lua MODE ...: how the work queue's delays keep time.
--
--   lateness N SECONDS   N keys added with delays spread evenly over
--                        SECONDS (in random order) to one work queue, taken
--                        by one task as they come due (q:take, woken by the
--                        loop's timer in C); beside it, the same delays slept
--                        by N tasks (luaop.sleep: a bare libuv timer each,
--                        the loop's own limit). Prints the lateness of each
--                        (taken or woken minus due): p50, p99, max, in ms.
--   idle NS SECONDS      a manager with one controller on the ConfigMaps of
--                        NS whose reconcile asks to run again in an hour;
--                        once it reconciled them, counts the loop's
--                        wake-ups (core.task.iterations) over SECONDS.
local core = require "luaop.core"
local luaop = require "luaop"

local mode = arg[1]
local function out(name, v) print(("%s %s"):format(name, v)) end

local function quantiles(xs)
  table.sort(xs)
  local function q(p) return xs[math.max(1, math.ceil(p * #xs))] end
  return q(0.5), q(0.99), xs[#xs]
end

if mode == "lateness" then
  local n, secs = tonumber(arg[2]), tonumber(arg[3])
  local delays = {}
  for i = 1, n do delays[i] = secs * i / n end
  for i = n, 2, -1 do -- shuffled: added out of order
    local j = math.random(i)
    delays[i], delays[j] = delays[j], delays[i]
  end
  local q = core.workqueue.new()
  local due, late, slept = {}, {}, {}
  local taker = luaop.spawn(function()
    while true do
      local k = q:take()
      if not k then return end
      late[#late + 1] = (core.task.now() - due[k]) * 1000
      q:done(k)
      if #late == n then q:shutdown() end
    end
  end)
  local sleepers = {}
  local t0 = core.task.now()
  for i, d in ipairs(delays) do
    local key = "k" .. i
    due[key] = t0 + d
    q:add_after(key, d, t0)
    sleepers[i] = luaop.spawn(function()
      luaop.sleep(t0 + d - core.task.now())
      slept[#slept + 1] = (core.task.now() - (t0 + d)) * 1000
    end)
  end
  assert(taker:wait())
  for _, s in ipairs(sleepers) do assert(s:wait()) end
  local early = 0
  for _, l in ipairs(late) do if l < 0 then early = early + 1 end end
  local p50, p99, max = quantiles(late)
  out("take_p50_ms", ("%.3f"):format(p50))
  out("take_p99_ms", ("%.3f"):format(p99))
  out("take_max_ms", ("%.3f"):format(max))
  out("take_early", early)
  p50, p99, max = quantiles(slept)
  out("sleep_p50_ms", ("%.3f"):format(p50))
  out("sleep_p99_ms", ("%.3f"):format(p99))
  out("sleep_max_ms", ("%.3f"):format(max))
  return 0
end

if mode == "idle" then
  local ns, secs = arg[2], tonumber(arg[3])
  local reconciled = 0
  local manager = require("luaop.manager").new()
  manager:add(luaop.controller {
    name = "hourly", resource = "v1/ConfigMap", namespace = ns,
    reconcile = function()
      reconciled = reconciled + 1
      return luaop.requeue_after(3600)
    end,
  })
  luaop.spawn(function() manager:start() end)
  while reconciled == 0 do luaop.sleep(0.05) end
  luaop.sleep(1) -- let the first reconciles settle
  local i0, t0 = core.task.iterations(), core.task.now()
  luaop.sleep(secs)
  out("wakeups", core.task.iterations() - i0 - 1) -- the sleep's own wake-up not counted
  out("seconds", ("%.2f"):format(core.task.now() - t0))
  out("reconciled", reconciled)
  manager:stop(1)
  return 0
end

error("bench/timers.lua: lateness N SECONDS | idle NS SECONDS", 0)
