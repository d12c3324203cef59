-- The watchdog: a thread outside the loop that interrupts a task which runs
-- too long without waiting (here one whose script declared a budget far
-- beyond what it should ever run), while the other controllers go on, and
-- that makes SIGTERM end luaop within its grace period whatever the script
-- does. Against the fake API server (its five ConfigMaps in default).
local luaop = require "support.luaop"
local fake = require "support.fake"
local volume = require "support.volume"
local kube = require "support.kube"
local proc = require "support.proc"
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
    -- the interrupt, and the steady controller reconciling all five (after
    -- it: the runaway held the loop meanwhile)
    local err = kube.wait_for("the watchdog's interrupt and five steady reconciles", 30, function()
      local e = run.stderr()
      local _, n = e:gsub("steady reconciled", "")
      return e:find("Reconciler error", 1, true) and e:find("interrupted by the watchdog", 1, true) and n >= 5 and e
    end)
    assert.matches('watchdog\ta task has run without waiting for too long: interrupting it\t{"task": ' ..
      '"reconcile runaway default/cm%-0", "seconds": 5%.%d+}', err)
    -- and SIGTERM ends it within the grace period, the runaway looping again
    local t0 = system.gettime()
    local code = run.stop(false)
    assert.is_true(system.gettime() - t0 < 31, "luaop outlived its grace period")
    assert.is_true(code == 0 or code == 1, tostring(code))
  end)

  -- The watchdog's exits need a loop stuck where no hook fires, which no
  -- script can reach any more: a trusted program's blocking call
  -- (os.execute) under --watchdog stands in for it.
  describe("when the loop is stuck where no hook fires", function()
    local function stuck(flags)
      local pidfile = os.tmpname()
      local run = luaop.start(([[
        io.stdout:write("blocking\n")
        io.stdout:flush()
        os.execute(%q)
        print("came back")
      ]]):format(proc.blocking_sleep(23.25, pidfile)), { offline = true, flags = flags, stop_deadline = 5 })
      finally(function()
        run.cleanup()
        proc.end_sleep(pidfile)
      end)
      kube.wait_for("the program to block", 10, function() return run.stdout():find("blocking", 1, true) end)
      return run
    end

    local function exited(run, within)
      return kube.wait_for("luaop to exit", within, function() return run.exited() end)
    end

    it("interrupts it after 5 s and exits 70 when it has not come back 5 s later, naming the task", function()
      local run = stuck { "--watchdog" }
      local t0 = system.gettime()
      exited(run, 20)
      local took = system.gettime() - t0
      assert.are.equal(70, run.stop(false))
      assert.is_true(took > 9.5 and took < 12, ("exited after %.1f s"):format(took))
      local err = run.stderr()
      assert.matches("a task has run without waiting for too long: interrupting it\t{\"task\": \"[^\"]+\", \"seconds\": 5%.", err)
      assert.matches("the loop did not come back after the interrupt: exiting\t{\"task\": \"[^\"]+\", \"seconds\": 10%.", err)
      assert.is_nil(run.stdout():find("came back", 1, true))
    end)

    it("ends the process with status 1 a second after the grace period of SIGTERM", function()
      local run = stuck { "--watchdog", "--graceful-shutdown-timeout", "1s" }
      run.signal("TERM")
      local t0 = system.gettime()
      exited(run, 10)
      local took = system.gettime() - t0
      assert.are.equal(1, run.stop(false))
      assert.is_true(took > 1.9 and took < 3, ("exited %.1f s after SIGTERM"):format(took))
      assert.matches("still running after the grace period: exiting", run.stderr())
    end)

    it("ends the process within a second of a second signal, with the signal's status", function()
      local run = stuck { "--watchdog" } -- a grace period of 30 s
      run.signal("TERM")
      system.sleep(0.3)
      assert.is_false(run.exited())
      run.signal("TERM") -- (system() ignores SIGINT while os.execute runs)
      local t0 = system.gettime()
      exited(run, 10)
      local took = system.gettime() - t0
      assert.are.equal(143, run.stop(false))
      assert.is_true(took < 1.5, ("exited %.1f s after the second signal"):format(took))
      assert.matches("a second signal while the loop is stuck: exiting", run.stderr())
    end)

    it("is not there for a program without --watchdog", function()
      -- past both times a watchdog would act: its exit 70 at 10 s, then
      -- (a grace period of 1 s) its exit 1 a second after SIGTERM's grace
      local run = stuck { "--graceful-shutdown-timeout", "1s" }
      local t0 = system.gettime()
      system.sleep(10.5)
      assert.is_false(run.exited(), "exited within 10.5 s of blocking")
      run.signal("TERM")
      system.sleep(2.5)
      assert.is_false(run.exited(), "exited within 2.5 s of SIGTERM")
      assert.is_true(system.gettime() - t0 < 20, "the program's block (23 s) may have ended first")
      run.signal("KILL")
      exited(run, 10)
      assert.are.equal(137, run.stop(false))
    end)
  end)
end)
