-- The watchdog: a thread outside the loop that interrupts a task which runs
-- too long without waiting (here one whose script declared a budget far
-- beyond what it should ever run), while the other controllers go on, and
-- that makes SIGTERM end luaop within its grace period whatever the script
-- does. Against the fake API server (its five ConfigMaps in default).
local luaop = require "support.luaop"
local fake = require "support.fake"
local volume = require "support.volume"
local kube = require "support.kube"
local system = require "system"

describe("the watchdog", function()
  it("interrupts a reconcile that runs 5 s without waiting, names it, and the other controllers go on", function()
    local server = fake.start()
    finally(server.stop)
    local v = volume.new { ["ops.lua"] = [[
local luaop = require "luaop"
return {
  luaop.controller {
    name = "runaway", resource = "v1/ConfigMap", namespace = "default",
    instructions = 1000000000000000, -- what its author thought it needed
    reconcile = function(ctx, req)
      if req.name == "cm-0" then while true do pcall(function() while true do end end) end end
    end,
  },
  luaop.controller {
    name = "steady", resource = "v1/ConfigMap", namespace = "default",
    reconcile = function(ctx, req) ctx.log:info("steady reconciled") end,
  },
}
]] }
    finally(function() v:remove() end)
    -- the limit lifted by whoever runs it: only the watchdog is left
    local run = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig,
      flags = { "--qps", "0", "--max-instructions", "1000000000000000" } })
    finally(run.cleanup)
    local err = kube.wait_for("the watchdog's interrupt", 30, function()
      local e = run.stderr()
      return e:find("Reconciler error", 1, true) and e:find("interrupted by the watchdog", 1, true) and e
    end)
    assert.matches('watchdog\ta task has run without waiting for too long: interrupting it\t{"task": ' ..
      '"reconcile runaway default/cm%-0", "seconds": 5%.%d+}', err)
    -- the steady controller reconciled all five
    local _, n = err:gsub("steady reconciled", "")
    assert.is_true(n >= 5, err)
    -- and SIGTERM ends it within the grace period, the runaway looping again
    local t0 = system.gettime()
    local code = run.stop(false)
    assert.is_true(system.gettime() - t0 < 31, "luaop outlived its grace period")
    assert.is_true(code == 0 or code == 1, tostring(code))
  end)
end)
