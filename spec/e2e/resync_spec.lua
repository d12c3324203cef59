-- resync = seconds: every object of a controller is reconciled again that
-- often, with nothing changing in the cluster. (And a field selector scopes
-- the controller's objects.)
local kube = require "support.kube"
local luaop = require "support.luaop"
local time = require("luaop").time

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
    kube.wait_for("four reconciles of an unchanged object", 30, function() return count() >= 4 end)
    -- every period: the repeats come about a second apart (not in a burst,
    -- not only now and then)
    local at = {}
    for ts in run.stderr():gmatch('(%d%d%d%d%-%d%d%-%d%dT[%d:.]+Z)\tINFO\t[^\t]*\treconciling\t{"name": "still"') do
      at[#at + 1] = assert(time.parse(ts))
    end
    for i = 3, 4 do -- between resyncs (the first follows the add at any phase)
      local gap = at[i] - at[i - 1]
      assert.is_true(gap > 0.5 and gap < 2.5, ("reconcile %d came %.2f s after the one before"):format(i, gap))
    end
    -- the namespace's kube-root-ca.crt is not the controller's
    assert.is_nil(run.stderr():find("kube-root-ca.crt", 1, true))
    -- nothing changed it meanwhile: the repeats came from the resync
    assert.are.equal(rv, kube.get("configmap", "still", ns).metadata.resourceVersion)
  end)
end)
