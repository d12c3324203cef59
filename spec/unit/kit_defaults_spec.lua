-- The test kit stores quantities and defaults as kube-apiserver does, so an
-- operator's "no write when current" check behaves in the kit as on a
-- cluster: issue 31's trial operator (a ResourceQuota for every Namespace
-- labelled team) that compares "0.5" with what it reads ("500m") writes on
-- every reconcile, and when that write stamps the object it writes for
-- ever, where the kit's livelock guard names it. Before, the kit kept
-- "0.5" and both passed. spec/e2e/parity_spec.lua compares the kit's
-- objects with the real ones.
local testing = require "luaop.testing"

local SCRIPT = [[
local luaop = require "luaop"
local CPU, STAMP = %q, %s
return luaop.controller {
  name = "quota",
  resource = "v1/Namespace",
  -- (a map, not owns: owns keys a cluster-scoped owner by its dependent's namespace)
  watches = { { "v1/ResourceQuota", map = function(q) return { { name = q.metadata.namespace } } end } },
  reconcile = function(ctx, req)
    local ns = ctx:get("Namespace", req)
    if not ns or not (ns.metadata.labels or {}).team then return end
    local q = ctx:get("ResourceQuota", "defaults", ns.metadata.name)
    if not q then
      assert(ctx:create(luaop.set_controller({ apiVersion = "v1", kind = "ResourceQuota",
        metadata = { name = "defaults", namespace = ns.metadata.name },
        spec = { hard = { ["requests.cpu"] = CPU, pods = "10" } } }, ns)))
    elseif q.spec.hard["requests.cpu"] ~= CPU then
      q.spec.hard["requests.cpu"] = CPU
      if STAMP then -- the write says how many times it was made
        q.metadata.annotations = q.metadata.annotations or {}
        q.metadata.annotations.writes = tostring(tonumber(q.metadata.annotations.writes or "0") + 1)
      end
      assert(ctx:update(q))
    end
  end,
}
]]

describe("the test kit, as kube-apiserver,", function()
  local env, path
  after_each(function()
    if env then env:stop() end
    if path then os.remove(path) end
    env, path = nil, nil
  end)

  local function env_for(cpu, stamp)
    local base = os.tmpname() -- (made: a name no one else takes)
    path = base .. ".lua"
    os.remove(base)
    local f = assert(io.open(path, "w"))
    f:write(SCRIPT:format(cpu, tostring(stamp or false)))
    f:close()
    env = testing.env { script = path }
    return env
  end

  local function team(name)
    return { apiVersion = "v1", kind = "Namespace", metadata = { name = name, labels = { team = "a" } } }
  end

  it("stores a quota's \"0.5\" as \"500m\": a script that compares \"0.5\" writes on every reconcile", function()
    env_for("0.5")
    assert(env:create(team("team-a")))
    local updates = env:actions { verb = "update", kind = "ResourceQuota" }
    assert.are.equal(1, #updates)
    local q = env:list("ResourceQuota")[1]
    assert.are.equal("500m", q.spec.hard["requests.cpu"])
    -- each reconcile writes again; the API server stores nothing new (no event, no resourceVersion)
    local ns = env:get("Namespace", "team-a")
    ns.metadata.labels.touched = "1"
    assert(env:update(ns))
    assert.are.equal(2, #env:actions { verb = "update", kind = "ResourceQuota" })
    assert.are.equal(q.metadata.resourceVersion, env:list("ResourceQuota")[1].metadata.resourceVersion)
  end)

  it("fails a script whose write to a quota it never finds current stamps it: a livelock, as it would loop on a cluster",
    function()
    env_for("0.5", true)
    local ok, err = pcall(env.create, env, team("team-a"))
    assert.is_false(ok, "the kit let the write loop settle")
    assert.matches("livelock: controller quota, key [^ ]*team%-a", tostring(err))
  end)

  it("settles with one write when the script compares the canonical \"500m\"", function()
    env_for("500m")
    assert(env:create(team("team-b")))
    env:advance(60)
    assert.are.equal(1, #env:actions { verb = "create", kind = "ResourceQuota" })
    assert.are.equal(0, #env:actions { verb = "update", kind = "ResourceQuota" })
    local q = env:list("ResourceQuota")[1]
    assert.are.same({ ["requests.cpu"] = "500m", pods = "10" }, q.spec.hard)
  end)

  it("defaults a HorizontalPodAutoscaler as autoscaling/v2 does: CPU at 80% with no metric, a behavior's rules filled",
    function()
    env = testing.env {}
    local function hpa(name, spec)
      spec.scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "x" }
      spec.maxReplicas = 3
      assert(env:create { apiVersion = "autoscaling/v2", kind = "HorizontalPodAutoscaler", metadata = { name = name },
        spec = spec })
      return env:get("HorizontalPodAutoscaler", name).spec
    end
    local cpu80 = { { type = "Resource", resource = { name = "cpu", target = { type = "Utilization",
      averageUtilization = 80 } } } }
    local a = hpa("a", {})
    assert.are.same(cpu80, a.metrics)
    assert.are.equal(1, a.minReplicas)
    assert.is_nil(a.behavior)
    local b = hpa("b", { behavior = { scaleDown = { stabilizationWindowSeconds = 60 } } })
    assert.are.same({
      scaleDown = { policies = { { periodSeconds = 15, type = "Percent", value = 100 } }, selectPolicy = "Max",
        stabilizationWindowSeconds = 60 },
      scaleUp = { policies = { { periodSeconds = 15, type = "Pods", value = 4 }, { periodSeconds = 15,
        type = "Percent", value = 100 } }, selectPolicy = "Max", stabilizationWindowSeconds = 0 },
    }, b.behavior)
    local c = hpa("c", { behavior = {}, metrics = { { type = "Resource", resource = { name = "memory",
      target = { type = "AverageValue", averageValue = "0.5Gi" } } } } })
    assert.is_nil(c.behavior.scaleDown.stabilizationWindowSeconds) -- (the controller's flag says)
    assert.are.equal("512Mi", c.metrics[1].resource.target.averageValue)
  end)
end)
