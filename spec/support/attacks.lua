-- spec/support/attacks.lua - what the containment specs share: an attack
-- script reconciling cm-0 beside a steady controller that ticks on cm-1
-- (ConfigMaps of spec/support/fake.lua's API server), and the checks of such
-- a run: the steady controller never waited, and SIGTERM still ended luaop
-- within its grace period.
local assert = require "luassert"
local kube = require "support.kube"
local fake = require "support.fake"
local volume = require "support.volume"
local luaop = require "support.luaop"
local time = require("luaop").time

local M = {}

-- A controller that logs "steady tick" every 50 ms.
M.steady = [[
local luaop = require "luaop"
return luaop.controller {
  name = "steady", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function(ctx, req)
    if req.name ~= "cm-1" then return end
    ctx.log:info("steady tick")
    return luaop.requeue_after(0.05)
  end,
}
]]

-- The script of attack `name`: controller attack-NAME, whose reconcile of
-- cm-0 runs `body`; `fields`, a line of the definition's fields (budgets).
function M.script(name, body, fields)
  return ([[
local luaop = require "luaop"
return luaop.controller {
  name = "attack-%s", resource = "v1/ConfigMap", namespace = "default",
%s  reconcile = function(ctx, req)
    if req.name ~= "cm-0" then return end
    %s
  end,
}
]]):format(name, fields and ("  " .. fields .. "\n") or "", body)
end

-- luaop running `files` (name -> script text: the attacks, the steady
-- controller) as --script DIR against a fake API server of its own, at
-- --qps 0 with a grace period of 2 s, and `flags` after those. Returns
-- luaop's handle, whose cleanup (for the spec's finally) stops luaop, the
-- server and removes the scripts, and the scripts' volume
-- (support.volume: v:update(files) changes them).
function M.start(files, flags)
  local server = fake.start()
  local v = volume.new(files)
  local argv = { "--qps", "0", "--graceful-shutdown-timeout", "2s" }
  for _, f in ipairs(flags or {}) do argv[#argv + 1] = f end
  local ok, run = pcall(luaop.start, { v.dir }, { kubeconfig = server.kubeconfig, flags = argv })
  if not ok then
    server.stop()
    v:remove()
    error(run, 0)
  end
  local stop = run.cleanup
  function run.cleanup()
    local done, err = pcall(stop)
    server.stop()
    v:remove()
    assert(done, err)
  end
  return run, v
end

-- The time stamps of the lines of `log` that match `pattern`.
function M.stamps(log, pattern)
  local t = {}
  for line in log:gmatch("[^\n]+") do
    if line:find(pattern) then t[#t + 1] = assert(time.parse(line:match("^(%S+)"))) end
  end
  return t
end

-- After ten more ticks: from the first "Reconciler error" on, the steady
-- controller never waited `gap` seconds between ticks, and ticked at least
-- `during` times before the last error. Returns the log.
function M.check_steady(run, gap, during)
  local log = run.stderr()
  local first_attack = M.stamps(log, "Reconciler error")[1]
  assert.is_not_nil(first_attack, "no attack failed:\n" .. log:sub(-3000))
  local n0 = #M.stamps(log, "steady tick")
  log = kube.wait_for("more ticks", 30, function()
    local e = run.stderr()
    return #M.stamps(e, "steady tick") > n0 + 10 and e
  end)
  local ticks, errors = M.stamps(log, "steady tick"), M.stamps(log, "Reconciler error")
  local n = 0
  for i = 2, #ticks do
    if ticks[i] > first_attack then
      assert.is_true(ticks[i] - ticks[i - 1] < gap, ("the steady controller waited %.2f s after %.3f:\n%s"):format(
        ticks[i] - ticks[i - 1], ticks[i - 1], log:gsub("[^\n]*steady tick[^\n]*\n", ""):sub(-4000)))
      if ticks[i] < errors[#errors] then n = n + 1 end
    end
  end
  assert.is_true(n >= during, "the steady controller ticked " .. n .. " times while the attacks ran")
  return log
end

-- SIGTERM, attacks still retrying: luaop exits within 30 s (its exit timed,
-- not stop()'s reading of the log after it, minutes in a spec process under
-- valgrind), with 0 or 1, its last line saying why, and at most 3.5 s from
-- its "stopping" line to its last by its own clock (the grace period is
-- 2 s). Returns the log.
function M.check_stop(run)
  run.signal("TERM")
  kube.wait_for("luaop to exit", 30, run.exited)
  local code = run.stop(false)
  assert.is_true(code == 0 or code == 1, tostring(code))
  local log = run.stderr()
  local stopping = M.stamps(log, "\tstopping\t")[1]
  assert.is_not_nil(stopping, log)
  local last = assert(time.parse(log:match("\n(%S+)\t[^\n]*\n?$")))
  local last_line = log:match("([^\n]*)\n?$")
  assert.is_truthy(last_line:find("\tstopped\t", 1, true) or last_line:find(": exiting\t", 1, true),
    "its last line does not say why it ended: " .. last_line)
  assert.is_true(last - stopping < 3.5, ("luaop took %.1f s to stop"):format(last - stopping))
  return log
end

return M
