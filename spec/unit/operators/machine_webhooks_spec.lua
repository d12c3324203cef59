-- operators/webhooks/machine-webhooks.lua, with the test kit: the mutation
-- runs through the webhook server's own request handling (env:admit), and
-- its JSON patch is applied as the API server would. Runs under busted and
-- under `luaop --test spec/unit/operators`.
local testing = require "luaop.testing"

describe("operators/webhooks/machine-webhooks.lua", function()
  local env
  before_each(function()
    env = testing.env { script = "operators/webhooks/machine-webhooks.lua", manifests = { "manifests/crds" } }
  end)
  after_each(function() if env then env:stop() end end)

  local function machine(spec)
    return { apiVersion = "useless.container.training/v1alpha1", kind = "Machine",
      metadata = { name = "m", namespace = "default" }, spec = spec }
  end

  it("gives a Machine without spec.switches 1, as a JSON patch", function()
    local r = env:admit(machine {})
    assert.is_true(r.allowed)
    assert.are.same({ { op = "add", path = "/spec/switches", value = 1 } }, r.patch)
    assert.are.equal(1, r.object.spec.switches)
    r = env:admit(machine(nil))
    assert.are.same({ { op = "add", path = "/spec", value = { switches = 1 } } }, r.patch)
  end)

  it("leaves a Machine with switches as it is: no patch", function()
    local r = env:admit(machine { switches = 3 })
    assert.is_true(r.allowed)
    assert.is_nil(r.patch)
    assert.are.equal(3, r.object.spec.switches)
  end)
end)
