-- Event filters on the real API server: "generation" drops a status write
-- and a metadata-only change of a custom resource (its status subresource
-- leaves metadata.generation as it was) and passes a spec change and the
-- delete; a ConfigMap, which the API server gives no generation, has every
-- update pass; a watch's filter function drops what it says. "Not
-- reconciled" is measured against a later event that is: the watch of one
-- object delivers its events in order.
local kube = require "support.kube"
local luaop = require "support.luaop"

-- The log lines of reconcile (`reconciling` with fields) in luaop's stderr,
-- each the text of its fields.
local function reconciles(run, name)
  local out = {}
  for fields in run.stderr():gmatch("\treconciling\t(%b{})") do
    if fields:find('"name": "' .. name .. '"', 1, true) then out[#out + 1] = fields end
  end
  return out
end

describe("an event filter on the real API server", function()
  it("generation: a status write, a label and a finalizer do not reconcile a custom resource; a spec change, the "
    .. "start of its deletion and the delete do", function()
    local ns = kube.new_namespace("e2e-filter")
    local group = ns:gsub("[^%w]", "") .. ".e2e.luaop.dev"
    local crd = "gadgets." .. group
    finally(function()
      -- (a finalizer left by a failure would hold the namespace and the CRD)
      kube.kubectl { "patch", "gadget." .. group, "g", "-n", ns, "--type=merge",
        "-p", '{"metadata": {"finalizers": null}}' }
      kube.kubectl { "delete", "crd", crd, "--wait=false" }
      kube.delete_namespace(ns)
    end)
    kube.apply(([[
{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
 "metadata": {"name": "%s"},
 "spec": {"group": "%s", "scope": "Namespaced",
  "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
  "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}
]]):format(crd, group))
    kube.must { "wait", "--for=condition=Established", "crd/" .. crd, "--timeout=30s" }
    local run = luaop.start(([[
      local luaop = require "luaop"
      return luaop.controller {
        name = "filtered", resource = %q, namespace = %q, filter = "generation",
        reconcile = function(ctx, req)
          local g = ctx:get(%q, req)
          ctx.log:info("reconciling", { generation = g and g.metadata.generation or 0,
            deleting = g and g.metadata.deletionTimestamp ~= nil or false })
        end,
      }
    ]]):format(group .. "/v1/Gadget", ns, group .. "/v1/Gadget"))
    finally(function()
      run.stop()
      run.cleanup()
    end)
    kube.apply(([[{"apiVersion": "%s/v1", "kind": "Gadget", "metadata": {"name": "g", "namespace": "%s"},
      "spec": {"size": 1}}]]):format(group, ns))
    kube.wait_for("the add reconciled", 30, function() return #reconciles(run, "g") == 1 end)
    -- a status write (through /status) and a label: generation stays 1
    kube.must { "patch", "gadget." .. group, "g", "-n", ns, "--subresource=status", "--type=merge",
      "-p", '{"status": {"ready": true}}' }
    kube.must { "label", "gadget." .. group, "g", "-n", ns, "tier=small" }
    local g = kube.get("gadget." .. group, "g", ns)
    assert.are.equal(1, g.metadata.generation)
    assert.are.equal(true, g.status.ready)
    -- the spec change: generation 2, reconciled; the two before it were not
    kube.must { "patch", "gadget." .. group, "g", "-n", ns, "--type=merge", "-p", '{"spec": {"size": 2}}' }
    kube.wait_for("the spec change reconciled", 30, function()
      local r = reconciles(run, "g")
      return r[#r] and r[#r]:find('"generation": 2', 1, true)
    end)
    local r = reconciles(run, "g")
    assert.are.equal(2, #r, table.concat(r, "\n"))
    assert.matches('"generation": 1', r[1])
    -- a finalizer (metadata: dropped), then the delete it holds: the
    -- deletionTimestamp raises the generation, so it passes
    kube.must { "patch", "gadget." .. group, "g", "-n", ns, "--type=merge",
      "-p", '{"metadata": {"finalizers": ["e2e.luaop.dev/hold"]}}' }
    kube.must { "delete", "gadget." .. group, "g", "-n", ns, "--wait=false" }
    kube.wait_for("the start of the deletion reconciled", 30, function()
      local rr = reconciles(run, "g")
      return rr[#rr] and rr[#rr]:find('"deleting": true', 1, true)
    end)
    assert.are.equal(3, #reconciles(run, "g"))
    assert.matches('"generation": 3', reconciles(run, "g")[3])
    kube.must { "patch", "gadget." .. group, "g", "-n", ns, "--type=merge", "-p", '{"metadata": {"finalizers": null}}' }
    kube.wait_for("the delete reconciled", 30, function()
      local rr = reconciles(run, "g")
      return rr[#rr] and rr[#rr]:find('"generation": 0', 1, true)
    end)
    assert.are.equal(4, #reconciles(run, "g"))
  end)

  it("passes every update of a ConfigMap (no generation), and a watch's filter function drops what it says",
    function()
      local ns = kube.new_namespace("e2e-filter")
      finally(function() kube.delete_namespace(ns) end)
      local run = luaop.start(([[
      local luaop = require "luaop"
      local ns = %q
      return luaop.controller {
        name = "filtered", resource = "v1/ConfigMap", namespace = ns, filter = "generation",
        label_selector = "filtered=yes",
        watches = { { "v1/Secret", namespace = ns,
          filter = function(old, new) return new ~= nil and (new.metadata.labels or {}).wake == "yes" end,
          map = function(s) return { namespace = ns, name = s.metadata.name } end } },
        reconcile = function(ctx, req)
          local c = ctx:get("ConfigMap", req)
          ctx.log:info("reconciling", { tier = c and (c.metadata.labels or {}).tier or "-" })
        end,
      }
    ]]):format(ns))
      finally(function()
        run.stop()
        run.cleanup()
      end)
      kube.must { "create", "configmap", "c", "-n", ns, "--from-literal=k=v" }
      kube.must { "label", "configmap", "c", "-n", ns, "filtered=yes" }
      kube.wait_for("the add reconciled", 30, function() return #reconciles(run, "c") == 1 end)
      assert.is_nil(kube.get("configmap", "c", ns).metadata.generation)
      -- a label change: no generation to compare, so it passes
      kube.must { "label", "configmap", "c", "-n", ns, "tier=small" }
      kube.wait_for("the label change reconciled", 30, function()
        local r = reconciles(run, "c")
        return r[#r] and r[#r]:find('"tier": "small"', 1, true)
      end)
      assert.are.equal(2, #reconciles(run, "c"))
      -- a Secret the watch's filter drops (its add), then one it passes
      -- (its label, after its add): the watch delivers them in this order
      kube.must { "create", "secret", "generic", "asleep", "-n", ns, "--from-literal=k=v" }
      kube.must { "create", "secret", "generic", "awake", "-n", ns, "--from-literal=k=v" }
      kube.must { "label", "secret", "awake", "-n", ns, "wake=yes" }
      kube.wait_for("the labelled Secret's reconcile", 30, function() return #reconciles(run, "awake") == 1 end)
      assert.are.equal(0, #reconciles(run, "asleep"))
      assert.are.equal(2, #reconciles(run, "c"))
      assert.is_nil(run.stderr():find("event filter failed", 1, true))
    end)
end)
