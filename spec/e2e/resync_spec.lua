-- resync = seconds: every object of a controller is reconciled again that
-- often, with nothing changing in the cluster. (And a field selector scopes
-- the controller's objects.)
local kube = require "support.kube"
local luaop = require "support.luaop"

describe("a controller with a resync period", function()
  it("reconciles an unchanged object again every period", function()
    local ns = kube.new_namespace("e2e-resync")
    local run = luaop.start(([[
      local luaop = require "luaop"
      return luaop.controller {
        name = "resync", resource = "v1/ConfigMap", namespace = %q, resync = 1,
        field_selector = "metadata.name=still",
        reconcile = function(ctx, req) ctx.log:info("reconciling") end,
      }
    ]]):format(ns))
    finally(function()
      run.stop()
      run.cleanup()
      kube.delete_namespace(ns)
    end)
    kube.must { "create", "configmap", "still", "-n", ns, "--from-literal=k=v" }
    local rv = kube.get("configmap", "still", ns).metadata.resourceVersion
    local function count()
      local n = 0
      for _ in run.stderr():gmatch('reconciling\t{"name": "still"') do n = n + 1 end
      return n
    end
    kube.wait_for("three reconciles of an unchanged object", 30, function() return count() >= 3 end)
    -- the namespace's kube-root-ca.crt is not the controller's
    assert.is_nil(run.stderr():find("kube-root-ca.crt", 1, true))
    -- nothing changed it meanwhile: the repeats came from the resync
    assert.are.equal(rv, kube.get("configmap", "still", ns).metadata.resourceVersion)
  end)
end)
