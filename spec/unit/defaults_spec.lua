-- What luaop does when nothing says otherwise: no server listens unless a
-- flag names its address, and a signal ends a program with the shell's
-- status for it (SIGTERM 143, SIGINT 130).
local luaop = require "support.luaop"
local fake = require "support.fake"
local volume = require "support.volume"
local kube = require "support.kube"
local proc = require "support.proc"

-- The TCP ports process pid listens on (ss), as a list of strings.
local function listening(pid)
  local ok, out = proc.sh("ss -Htlnp")
  assert(ok, out)
  local ports = {}
  for line in out:gmatch("[^\n]+") do
    if line:find("pid=" .. pid .. ",", 1, true) then ports[#ports + 1] = line end
  end
  return ports
end

describe("by default luaop", function()
  it("listens on nothing: no metrics server and no probe server unless their flags name an address", function()
    local server = fake.start()
    finally(server.stop)
    local v = volume.new { ["steady.lua"] = [[
local luaop = require "luaop"
return luaop.controller { name = "steady", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function(ctx) ctx.log:info("reconciled") end }
]] }
    finally(function() v:remove() end)
    local run = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig })
    finally(run.cleanup)
    kube.wait_for("a reconcile", 20, function() return run.stderr():find("reconciled", 1, true) end)
    assert.are.same({}, listening(run.pid()))
    assert.is_nil(run.stderr():find("Serving metrics server", 1, true))
    assert.is_nil(run.stderr():find("health probe", 1, true))
    -- and with the flags, both listen (the check above can see a listener)
    local both = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig, flags = {
      "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0" } })
    finally(both.cleanup)
    kube.wait_for("two listeners", 20, function() return #listening(both.pid()) == 2 end)
    kube.wait_for("its reconcile (synced: SIGTERM drains)", 20, function()
      return both.stderr():find("reconciled", 1, true)
    end)
  end)

  for _, case in ipairs { { "TERM", 143 }, { "INT", 130 } } do
    it("ends a program at SIG" .. case[1] .. " with status " .. case[2], function()
      local run = luaop.start([[
        print("waiting")
        io.stdout:flush()
        require("luaop").sleep(60)
      ]], { offline = true })
      finally(run.cleanup)
      kube.wait_for("the program to wait", 10, function() return run.stdout():find("waiting", 1, true) end)
      run.signal(case[1])
      kube.wait_for("luaop to exit", 10, run.exited)
      assert.are.equal(case[2], run.stop(false))
    end)
  end
end)
