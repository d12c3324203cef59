-- luaop.requeue(): the reconcile runs again after the work queue's per-key
-- backoff (5 ms doubling, as controller-runtime's Result{Requeue: true}).
-- Against spec/support/fake.lua's ConfigMaps.
local attack = require "support.attacks"
local kube = require "support.kube"

local script = [[
local luaop = require "luaop"
local n = 0
return luaop.controller {
  name = "again", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function(ctx, req)
    if req.name ~= "cm-1" then return end
    n = n + 1
    ctx.log:info("again", { n = n })
    if n <= 6 then return luaop.requeue() end
  end,
}
]]

describe("luaop.requeue()", function()
  it("runs the reconcile again after the key's backoff, 5 ms doubling", function()
    local run = attack.start({ ["again.lua"] = script })
    finally(run.cleanup)
    local log = kube.wait_for("seven reconciles", 30, function()
      local e = run.stderr()
      return #attack.stamps(e, "\tagain\t") >= 7 and e
    end)
    local t = attack.stamps(log, "\tagain\t")
    assert.are.equal(7, #t, log)
    -- a requeue, not an error (which backs off the same way)
    assert.is_nil(log:find("Reconciler error", 1, true), log)
    -- waits of 5, 10, 20, 40, 80 and 160 ms (a requeue with no backoff would
    -- not wait at all): 315 ms in all, the last two 80 and 160
    assert.is_true(t[7] - t[1] >= 0.3, ("six requeues took %.3f s"):format(t[7] - t[1]))
    assert.is_true(t[6] - t[5] >= 0.07, ("the fifth wait: %.3f s"):format(t[6] - t[5]))
    local last = t[7] - t[6]
    assert.is_true(last >= 0.15 and last < 1, ("the sixth wait: %.3f s"):format(last))
  end)
end)
