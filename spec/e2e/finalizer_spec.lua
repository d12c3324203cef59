-- A definition's finalizer on the local control plane: the real API
-- server holds a deleted object while the finalizer is on it, luaop calls
-- finalize and takes the finalizer off, and the object goes; a finalize
-- that raises is retried until it returns.
local kube = require "support.kube"
local luaop = require "support.luaop"
local volume = require "support.volume"

local F = "e2e.luaop.example.com/cleanup"
local OTHER = "other.example.com/keep"

describe("a controller's finalizer, on the API server,", function()
  local ns, run, vol

  before_each(function()
    ns = kube.new_namespace("e2e-fin")
  end)

  after_each(function()
    if run then run.cleanup() end
    if vol then vol:remove() end
    run, vol = nil, nil
    -- (nothing left held by a finalizer, whatever failed)
    for _, cm in ipairs(kube.list("configmaps", ns)) do
      if cm.metadata.finalizers then
        kube.kubectl { "patch", "configmap", cm.metadata.name, "-n", ns, "--type=merge", "-p",
          '{"metadata":{"finalizers":null}}' }
      end
    end
    kube.delete_namespace(ns)
  end)

  -- luaop with a controller of the namespace's ConfigMaps whose finalize
  -- raises the first `fails` times it is called for an object
  local function start(fails, extra)
    vol = volume.new { ["fin.lua"] = ([[
local luaop = require "luaop"
local calls = {}
return luaop.controller {
  name = "fin", resource = "v1/ConfigMap", namespace = %q, %s
  finalizer = %q,
  finalize = function(ctx, obj)
    local name = obj.metadata.name
    calls[name] = (calls[name] or 0) + 1
    if calls[name] <= %d then error("not yet: call " .. calls[name]) end
    ctx.log:info("finalized", { name = name, calls = calls[name] })
  end,
  reconcile = function(ctx, req)
    local cm = ctx:get("ConfigMap", req)
    if cm then ctx.log:info("reconciled", { name = req.name }) end
  end,
}
]]):format(ns, extra or "", F, fails) }
    run = luaop.start({ vol.dir })
    kube.wait_for("caches synced", 30, function() return run.stderr():find("caches synced", 1, true) end)
  end

  local function finalizers(name)
    local cm = kube.get("configmap", name, ns)
    return cm and cm.metadata.finalizers
  end

  local function has(name, f)
    for _, g in ipairs(finalizers(name) or {}) do
      if g == f then return true end
    end
    return false
  end

  it("is put on an object, keeping others', and when the object is deleted finalize runs and it goes", function()
    start(0)
    kube.must({ "apply", "-n", ns, "-f", "-" }, ([[
apiVersion: v1
kind: ConfigMap
metadata:
  name: held
  finalizers: [%q]
data: { k: v }
]]):format(OTHER))
    kube.must { "create", "configmap", "plain", "-n", ns, "--from-literal=k=v" }
    kube.wait_for("the finalizer on both", 30, function() return has("held", F) and has("plain", F) end)
    assert.are.same({ OTHER, F }, finalizers("held"))
    assert.are.same({ F }, finalizers("plain"))
    -- plain: finalized, then gone
    kube.must { "delete", "configmap", "plain", "-n", ns, "--wait=false" }
    kube.wait_for("plain gone", 30, function() return kube.get("configmap", "plain", ns) == nil end)
    assert.matches('\tfinalized\t[^\n]-"name": "plain"', run.stderr())
    -- held: finalized, our finalizer off, the other's kept (it holds it)
    kube.must { "delete", "configmap", "held", "-n", ns, "--wait=false" }
    kube.wait_for("held finalized", 30, function() return not has("held", F) end)
    local cm = kube.get("configmap", "held", ns)
    assert.is_string(cm.metadata.deletionTimestamp)
    assert.are.same({ OTHER }, cm.metadata.finalizers)
    assert.matches('\tfinalized\t[^\n]-"name": "held"', run.stderr())
  end)

  it("keeps the object while finalize raises, with a Warning Event, and lets it go once finalize returns", function()
    start(2)
    kube.must { "create", "configmap", "slow", "-n", ns, "--from-literal=k=v" }
    kube.wait_for("the finalizer", 30, function() return has("slow", F) end)
    kube.must { "delete", "configmap", "slow", "-n", ns, "--wait=false" }
    kube.wait_for("slow gone", 30, function() return kube.get("configmap", "slow", ns) == nil end)
    local err = run.stderr()
    assert.matches("Reconciler error.-not yet: call 1", err)
    assert.matches("Reconciler error.-not yet: call 2", err)
    assert.matches('\tfinalized\t[^\n]-"calls": 3', err)
    kube.wait_for("the Warning Event", 30, function()
      for _, e in ipairs(kube.list("events.v1.events.k8s.io", ns)) do
        if e.regarding and e.regarding.name == "slow" and e.reason == "ReconcileError" then
          return e.type == "Warning" and e.note:find("not yet: call 1", 1, true)
        end
      end
    end)
  end)

  it("is taken off an object that leaves the controller's label selector, so a delete lets it go", function()
    start(0, [[label_selector = "keep=yes",]])
    kube.must { "create", "configmap", "kept", "-n", ns, "--from-literal=k=v" }
    kube.must { "label", "configmap", "kept", "-n", ns, "keep=yes" }
    kube.wait_for("the finalizer", 30, function() return has("kept", F) end)
    kube.must { "label", "configmap", "kept", "-n", ns, "keep-" }
    kube.wait_for("the finalizer off", 30, function() return not has("kept", F) end)
    kube.must { "delete", "configmap", "kept", "-n", ns, "--wait=false" }
    kube.wait_for("kept gone", 30, function() return kube.get("configmap", "kept", ns) == nil end)
    assert.is_nil(run.stderr():find("\tfinalized\t", 1, true))
  end)
end)
