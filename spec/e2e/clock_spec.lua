-- One clock, on the real API server: a script's os.time and os.date read
-- the wall clock luaop.time reads, which agrees with the API server's
-- timestamps.
local kube = require "support.kube"
local luaop = require "support.luaop"
local time = require("luaop").time

describe("a script's os clocks against the API server", function()
  it("say what luaop.time says, which agrees with the API server's creationTimestamp", function()
    local ns = kube.new_namespace("e2e-clock")
    local run = luaop.start(([[
      local luaop = require "luaop"
      return luaop.controller {
        name = "clocks", resource = "v1/ConfigMap", namespace = %q, field_selector = "metadata.name=c",
        reconcile = function(ctx, req)
          local cm = ctx:get("ConfigMap", req)
          if not cm or (cm.data or {}).date then return end
          local wall, t = luaop.time.wall(), os.time()
          cm.data = { date = os.date("!%%Y-%%m-%%dT%%H:%%M:%%SZ", t), time = tostring(t),
            agrees = tostring(t == math.floor(wall) or t == math.floor(wall) + 1) }
          assert(ctx:update(cm))
        end,
      }
    ]]):format(ns))
    finally(function()
      run.stop()
      run.cleanup()
      kube.delete_namespace(ns)
    end)
    kube.must { "create", "configmap", "c", "-n", ns }
    local cm
    kube.wait_for("the clocks written", 30, function()
      cm = kube.get("configmap", "c", ns)
      return cm and cm.data and cm.data.date
    end)
    assert.are.equal("true", cm.data.agrees)
    assert.are.equal(time.format(tonumber(cm.data.time)), cm.data.date)
    local created = assert(time.parse(cm.metadata.creationTimestamp))
    local seen = assert(time.parse(cm.data.date))
    assert.is_true(seen >= created - 1 and seen <= created + 30, cm.data.date .. " for " .. cm.metadata.creationTimestamp)
  end)
end)
