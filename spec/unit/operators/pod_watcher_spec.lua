-- operators/pod-watcher.lua's contract (DESIGN.md), with the test kit: its
-- handlers are told of each pod add, update and delete, once synced.
local testing = require "luaop.testing"

describe("operators/pod-watcher.lua", function()
  local env
  before_each(function()
    env = testing.env {
      script = "operators/pod-watcher.lua",
      objects = { { apiVersion = "v1", kind = "Pod", metadata = { name = "there", namespace = "default" },
        spec = { containers = { { name = "c", image = "busybox" } } } } },
    }
  end)
  after_each(function() if env then env:stop() end end)

  local function logged()
    local out = {}
    for _, l in ipairs(env:logs { logger = "controller.pod-watcher", msg = "^pod " }) do
      out[#out + 1] = l.msg .. " " .. l.fields.pod
    end
    return out
  end

  it("logs the pods there at the start as added, then each add, update and delete as namespace/name", function()
    assert.are.same({ "pod added default/there" }, logged())
    local pod = assert(env:create { apiVersion = "v1", kind = "Pod", metadata = { name = "new", namespace = "default" },
      spec = { containers = { { name = "c", image = "busybox" } } } })
    pod.status = { phase = "Running" }
    assert(env:update_status(pod))
    assert(env:delete("Pod", { namespace = "default", name = "new" }))
    assert.are.same({ "pod added default/there", "pod added default/new", "pod updated default/new",
      "pod deleted default/new" }, logged())
  end)

  it("writes nothing", function()
    assert(env:create { apiVersion = "v1", kind = "Pod", metadata = { name = "p", namespace = "default" },
      spec = { containers = { { name = "c", image = "busybox" } } } })
    assert.are.same({}, env:actions())
  end)
end)
