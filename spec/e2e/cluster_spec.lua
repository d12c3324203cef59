-- The local control plane is real: etcd and kube-apiserver store and validate,
-- kube-scheduler binds Pods to kwok's fake node, kwok runs them, and
-- kube-controller-manager collects garbage and gives namespaces their
-- ServiceAccounts. Every later e2e spec relies on what this one proves.
local kube = require "support.kube"

local function condition(obj, type_)
  for _, c in ipairs((obj.status or {}).conditions or {}) do
    if c.type == type_ then return c end
  end
end

describe("the local control plane", function()
  local ns

  setup(function()
    ns = kube.new_namespace("e2e-cluster")
  end)

  teardown(function()
    if ns then kube.delete_namespace(ns) end
  end)

  it("serves Kubernetes " .. "v1.37 from a real kube-apiserver", function()
    local v = kube.json.decode(kube.must { "get", "--raw", "/version" })
    assert.are.equal("1", v.major)
    assert.are.equal("37", v.minor)
    -- etcd behind it answers the API server's own health check.
    assert.matches("ok", kube.must { "get", "--raw", "/readyz/etcd" })
  end)

  it("has a Ready fake node run by kwok", function()
    local nodes = kube.list("nodes")
    local ready
    for _, n in ipairs(nodes) do
      local c = condition(n, "Ready")
      if c and c.status == "True" and n.metadata.annotations["kwok.x-k8s.io/node"] == "fake" then
        ready = n
      end
    end
    assert.is_not_nil(ready, "no Ready node annotated kwok.x-k8s.io/node=fake")
  end)

  it("created the namespace and its default ServiceAccount", function()
    local n = assert(kube.get("namespace", ns))
    assert.are.equal("Active", n.status.phase)
    assert.is_not_nil(kube.get("serviceaccount", "default", ns))
  end)

  it("installs a CRD and stores and validates its custom objects", function()
    local group = ("%s.e2e.luaop.dev"):format(ns:gsub("[^%w]", ""))
    kube.apply(([[
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%s
spec:
  group: %s
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
]]):format(group, group))
    kube.must { "wait", "--for=condition=Established", "crd/widgets." .. group, "--timeout=30s" }

    -- The new resource is served as soon as it is Established.
    local ok, out = kube.create(([[
apiVersion: %s/v1
kind: Widget
metadata: {name: w1, namespace: %s}
spec: {size: 3}
]]):format(group, ns))
    assert.is_true(ok, out)
    local w = assert(kube.get("widgets." .. group, "w1", ns))
    assert.are.equal(3, w.spec.size)
    assert.is_string(w.metadata.uid)

    -- The API server applies the CRD's schema.
    ok, out = kube.create(([[
apiVersion: %s/v1
kind: Widget
metadata: {name: w2, namespace: %s}
spec: {size: 0}
]]):format(group, ns))
    assert.is_false(ok)
    assert.matches("spec.size", out)
    assert.is_nil(kube.get("widgets." .. group, "w2", ns))

    kube.must { "delete", "crd", "widgets." .. group, "--wait=false" }
  end)

  it("schedules Pods to the fake node and runs a batch Pod to Succeeded", function()
    local pod = [[
apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  restartPolicy: %s
  containers:
  - {name: main, image: busybox, command: [sh, -c, "true"]}
]]
    -- Every phase the batch Pod goes through, as the API server reports it.
    local phases = kube.watch { "get", "pods", "-n", ns, "--field-selector", "metadata.name=batch",
                                "-o", "jsonpath={.status.phase}{\"\\n\"}" }
    finally(phases.stop)
    kube.must({ "create", "-f", "-" }, pod:format("batch", ns, "Never"))
    kube.must({ "create", "-f", "-" }, pod:format("server", ns, "Always"))

    -- kube-scheduler binds it to the node, kwok starts it, and, since its
    -- restartPolicy is Never, finishes it a little later.
    kube.wait_for("Pod batch Succeeded", 30, function()
      local seen = phases.lines()
      return seen[#seen] == "Succeeded"
    end)
    local seen = table.concat(phases.lines(), " ")
    assert.matches("Running Succeeded$", seen)

    local done = assert(kube.get("pod", "batch", ns))
    assert.are.equal("Succeeded", done.status.phase)
    local node = assert(kube.get("node", done.spec.nodeName))
    assert.are.equal("fake", node.metadata.annotations["kwok.x-k8s.io/node"])
    local state = done.status.containerStatuses[1].state
    assert.are.equal(0, state.terminated.exitCode)

    -- A Pod that restarts Always is a server: it keeps running.
    local server = assert(kube.get("pod", "server", ns))
    assert.are.equal(done.spec.nodeName, server.spec.nodeName)
    assert.are.equal("Running", server.status.phase)
  end)

  it("garbage-collects a dependent when its owner is deleted", function()
    local owner = kube.json.decode(kube.must({ "create", "-f", "-", "-o", "json" }, ([[
apiVersion: v1
kind: ConfigMap
metadata: {name: owner, namespace: %s}
data: {role: owner}
]]):format(ns)))
    kube.must({ "create", "-f", "-" }, ([[
apiVersion: v1
kind: ConfigMap
metadata:
  name: dependent
  namespace: %s
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: owner, uid: %s, controller: true}
data: {role: dependent}
]]):format(ns, owner.metadata.uid))
    assert.is_not_nil(kube.get("configmap", "dependent", ns))

    kube.must { "delete", "configmap", "owner", "-n", ns, "--cascade=background" }
    kube.wait_for("the dependent ConfigMap to be collected", 60, function()
      return kube.get("configmap", "dependent", ns) == nil
    end)
  end)

  it("enforces RBAC: a ServiceAccount without roles is denied", function()
    local sa = "system:serviceaccount:" .. ns .. ":default"
    local ok, out = kube.kubectl { "auth", "can-i", "create", "pods", "-n", ns, "--as", sa }
    assert.is_false(ok)
    assert.matches("^no", out)
    ok, out = kube.kubectl { "get", "pods", "-n", ns, "--as", sa }
    assert.is_false(ok)
    assert.matches("Forbidden", out)
  end)
end)
