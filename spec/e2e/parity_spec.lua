-- Parity: the same manifests created in the kit's in-memory API server
-- (luaop.testing.apiserver) and on the local control plane's real
-- kube-apiserver, and the objects each answered compared whole: what it
-- stored after defaulting and admission, before any controller acted.
-- Ignored: uid, resourceVersion, creationTimestamp, managedFields (but not
-- metadata.generation: the kit keeps none where the API server does); the
-- random suffix of kube-api-access-*;
-- the addresses and ports the allocators chose (clusterIP, nodePort).
local kube = require "support.kube"
local apiserver = require "luaop.testing.apiserver"
local json = require("luaop.core").json

-- YAML manifests as objects, read by kubectl (no YAML reader in the specs):
-- it prints one JSON document after another.
local function manifests(path)
  local out = kube.must { "create", "--dry-run=client", "-o", "json", "-f", path }
  local items = {}
  for doc in (out:match("^.-\n?({.*)$") .. "\n"):gmatch("({\n.-\n})\n") do
    local obj = json.decode(doc)
    obj.metadata.namespace, obj.metadata.creationTimestamp = nil, nil
    items[#items + 1] = obj
  end
  assert(#items > 0, "no object in " .. path)
  return items
end

-- Where a and b differ: "path: a | b" lines, sorted.
local function differences(a, b, path, out)
  out = out or {}
  path = path or ""
  if type(a) == "table" and type(b) == "table" and a ~= json.null and b ~= json.null then
    local keys = {}
    for k in pairs(a) do keys[k] = true end
    for k in pairs(b) do keys[k] = true end
    for k in pairs(keys) do differences(a[k], b[k], path .. "." .. tostring(k), out) end
  elseif json.encode(a == nil and json.null or a) ~= json.encode(b == nil and json.null or b) then
    out[#out + 1] = ("%s: %s | %s"):format(path, a == nil and "(none)" or json.encode(a),
      b == nil and "(none)" or json.encode(b))
  end
  table.sort(out)
  return out
end

local function copy(v) return json.decode(json.encode(v)) end

-- The path of kind obj's collection on server s.
local function kit_path(s, obj, ns)
  local gv = s.gvs[obj.apiVersion]
  assert(gv, "the kit serves no " .. obj.apiVersion)
  for _, res in ipairs(gv.order) do
    local k = gv.kinds[res]
    if k.kind == obj.kind then
      return (k.group == "" and "/api/" or "/apis/") .. k.gv .. (k.namespaced and "/namespaces/" .. ns or "")
        .. "/" .. k.resource
    end
  end
  error("the kit serves no " .. obj.apiVersion .. " " .. obj.kind)
end

-- The object kubectl printed (after any warning lines).
local function printed(out)
  local at = out:find("\n{", 1, true)
  return json.decode(out:sub(1, 1) == "{" and out or out:sub(at + 1))
end

-- Replace, anywhere in v, the object's own uid and what the allocators chose.
local function scrub(v, uid, key)
  if type(v) == "string" then
    if uid and v == uid then return "<uid>" end
    if (key == "clusterIP" or key == "clusterIPs") and v:match("^%d+%.%d+%.%d+%.%d+$") then return "<ip>" end
    return (v:gsub("^kube%-api%-access%-%w+$", "kube-api-access-<suffix>"))
  end
  if key == "nodePort" and math.type(v) == "integer" then return "<port>" end
  if type(v) ~= "table" or v == json.null then return v end
  local out = json.is_array(v) and json.array() or {}
  for k2, x in pairs(v) do
    out[k2] = scrub(x, uid, type(k2) == "string" and k2 or key)
  end
  return out
end

local function normal(obj)
  obj = copy(obj)
  local md = obj.metadata
  local uid = md.uid
  md.uid, md.resourceVersion, md.creationTimestamp, md.managedFields = nil, nil, nil, nil
  return scrub(obj, uid)
end

describe("the kit's API server, against kube-apiserver v1.37,", function()
  local ns, s, crds

  setup(function()
    kube.must { "apply", "-k", "manifests/crds" }
    kube.must { "wait", "--for", "condition=Established", "crd", "--all", "--timeout=30s" }
    ns = kube.new_namespace("parity")
    s = apiserver.new { seed = 31 }
    crds = {}
    for _, f in ipairs { "at", "machine", "switch" } do
      for _, crd in ipairs(manifests("manifests/crds/" .. f .. ".yaml")) do
        s:add_crd(crd)
        crds[#crds + 1] = crd.spec.names.kind
      end
    end
    local code, text = s:request("POST", "/api/v1/namespaces", json.encode { apiVersion = "v1", kind = "Namespace",
      metadata = { name = ns } })
    assert(code == 201, text)
  end)

  teardown(function()
    if ns then kube.delete_namespace(ns) end
  end)

  -- Create obj on both; the two answers, normalised: kit, real.
  local function both(obj)
    local ok, out = kube.kubectl({ "create", "-n", ns, "-o", "json", "-f", "-" }, json.encode(obj))
    assert(ok, "kube-apiserver refused it: " .. out)
    local real = printed(out)
    local code, text = s:request("POST", kit_path(s, obj, ns), json.encode(obj))
    assert(code == 201, ("the kit answered %d: %s"):format(code, text))
    return normal(json.decode(text)), normal(real), real
  end

  local function same(obj)
    local kit, real = both(obj)
    local diff = differences(real, kit)
    assert(#diff == 0, obj.kind .. " " .. obj.metadata.name .. " differs (real | kit):\n" .. table.concat(diff, "\n"))
    return kit
  end

  local function pod_spec(extra)
    local spec = { containers = { { name = "c", image = "nginx", ports = { { containerPort = 80 } },
      resources = { requests = { cpu = "0.5", memory = "1.5Gi" }, limits = { cpu = "1000m", memory = "2048Mi" } },
      env = { { name = "N", valueFrom = { fieldRef = { fieldPath = "metadata.name" } } } },
      readinessProbe = { httpGet = { port = 80 } } } } }
    for k, v in pairs(extra or {}) do spec[k] = v end
    return spec
  end

  it("stores a ConfigMap as sent", function()
    same { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "cm", labels = { a = "b" } }, data = { k = "v" } }
  end)

  it("stores a Secret with its stringData in data, base64, and type Opaque by default", function()
    local kit = same { apiVersion = "v1", kind = "Secret", metadata = { name = "s1" },
      stringData = { username = "demo", password = "not-a-real-password" }, data = { x = "eHg=" } }
    assert.are.equal("ZGVtbw==", kit.data.username)
    for _, obj in ipairs(manifests("manifests/samples/secret.yaml")) do
      if obj.kind == "Secret" then same(obj) end
    end
  end)

  it("stores a Namespace with its name label, the kubernetes finalizer and phase Active", function()
    local name = ns .. "-x"
    finally(function() kube.delete_namespace(name) end)
    same { apiVersion = "v1", kind = "Namespace", metadata = { name = name } }
  end)

  it("stores a Pod as defaulted and admitted: its default ServiceAccount's token, tolerations, priority, qosClass",
    function()
    local kit = same { apiVersion = "v1", kind = "Pod", metadata = { name = "p1" }, spec = pod_spec() }
    assert.are.same({ "500m", "1536Mi" }, { kit.spec.containers[1].resources.requests.cpu,
      kit.spec.containers[1].resources.requests.memory })
    -- no token, init containers, requests from limits, an emptyDir's size, a digest, Guaranteed
    same { apiVersion = "v1", kind = "Pod", metadata = { name = "p2" }, spec = {
      automountServiceAccountToken = false,
      initContainers = { { name = "i", image = "busybox@sha256:" .. ("0"):rep(64),
        resources = { limits = { cpu = 1, memory = "1Gi" } } } },
      containers = { { name = "c", image = "reg:5000/app", resources = { limits = { cpu = "2", memory = "1Gi" } },
        volumeMounts = { { name = "v", mountPath = "/v" } } } },
      volumes = { { name = "v", emptyDir = { sizeLimit = "0.5Gi" } }, { name = "s", secret = { secretName = "x" } } } } }
    -- a ServiceAccount of its own, and a priority class of the system's
    same { apiVersion = "v1", kind = "ServiceAccount", metadata = { name = "sa1" } }
    s:request("POST", "/api/v1/namespaces/" .. ns .. "/serviceaccounts",
      json.encode { apiVersion = "v1", kind = "ServiceAccount", metadata = { name = "sa1" } })
    same { apiVersion = "v1", kind = "Pod", metadata = { name = "p3" }, spec = pod_spec {
      serviceAccountName = "sa1", priorityClassName = "system-cluster-critical",
      tolerations = { { key = "node.kubernetes.io/not-ready", operator = "Exists", effect = "NoExecute" } } } }
  end)

  it("refuses a Pod whose ServiceAccount does not exist, in the same words", function()
    local obj = { apiVersion = "v1", kind = "Pod", metadata = { name = "ghost" },
      spec = { serviceAccountName = "ghost", containers = { { name = "c", image = "i" } } } }
    local ok, out = kube.kubectl({ "create", "-n", ns, "-f", "-" }, json.encode(obj))
    assert.is_false(ok)
    local code, text = s:request("POST", kit_path(s, obj, ns), json.encode(obj))
    assert.are.equal(403, code)
    assert.matches(json.decode(text).message, out, 1, true)
  end)

  it("stores a Deployment with its strategy, limits and template defaulted (the manifests' own too)", function()
    same { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "d1" }, spec = {
      selector = { matchLabels = { app = "d1" } },
      template = { metadata = { labels = { app = "d1" } }, spec = pod_spec() } } }
    for _, obj in ipairs(manifests("manifests/deploy/deployment.yaml")) do same(obj) end
  end)

  it("stores a ReplicaSet, a StatefulSet, a DaemonSet and a PodTemplate defaulted", function()
    local function tpl(l) return { metadata = { labels = { a = l } }, spec = pod_spec() } end
    same { apiVersion = "apps/v1", kind = "ReplicaSet", metadata = { name = "rs" },
      spec = { selector = { matchLabels = { a = "rs" } }, template = tpl("rs") } }
    same { apiVersion = "apps/v1", kind = "StatefulSet", metadata = { name = "ss" },
      spec = { selector = { matchLabels = { a = "ss" } }, serviceName = "ss", template = tpl("ss"),
        volumeClaimTemplates = { { metadata = { name = "data" }, spec = { accessModes = { "ReadWriteOnce" },
          resources = { requests = { storage = "1.5Gi" } } } } } } }
    same { apiVersion = "apps/v1", kind = "DaemonSet", metadata = { name = "ds" },
      spec = { selector = { matchLabels = { a = "ds" } }, template = tpl("ds") } }
    same { apiVersion = "v1", kind = "PodTemplate", metadata = { name = "pt" }, template = { spec = pod_spec() } }
  end)

  it("stores a Service with its type, ports, IP families and traffic policies (the addresses aside)", function()
    same { apiVersion = "v1", kind = "Service", metadata = { name = "s1" },
      spec = { selector = { app = "d1" }, ports = { { port = 80 } } } }
    same { apiVersion = "v1", kind = "Service", metadata = { name = "s2" },
      spec = { type = "NodePort", selector = { app = "d1" }, ports = { { port = 80, targetPort = "http" } } } }
    same { apiVersion = "v1", kind = "Service", metadata = { name = "s3" },
      spec = { clusterIP = "None", ports = { { port = 80 } } } }
    same { apiVersion = "v1", kind = "Service", metadata = { name = "s4" },
      spec = { type = "ExternalName", externalName = "example.com" } }
    same { apiVersion = "v1", kind = "Service", metadata = { name = "s5" },
      spec = { sessionAffinity = "ClientIP", selector = { a = "b" }, ports = { { port = 80, targetPort = "web" } } } }
    for _, obj in ipairs(manifests("manifests/deploy/metrics-service.yaml")) do same(obj) end
  end)

  it("updates (PUT) a Service that leaves out its allocations: its cluster IPs kept, a nodePort by its port's name",
    function()
    both { apiVersion = "v1", kind = "Service", metadata = { name = "s6" }, spec = { type = "NodePort",
      selector = { a = "b" }, ports = { { name = "http", port = 80 }, { name = "x", port = 81 } } } }
    local function put(rv)
      return { apiVersion = "v1", kind = "Service", metadata = { name = "s6", resourceVersion = rv },
        spec = { type = "NodePort", selector = { a = "c" }, ports = { { name = "http", port = 80 }, { name = "y", port = 82 } } } }
    end
    local before = kube.get("service", "s6", ns)
    local real = printed(kube.must({ "replace", "-n", ns, "-o", "json", "-f", "-" },
      json.encode(put(before.metadata.resourceVersion))))
    local path = "/api/v1/namespaces/" .. ns .. "/services/s6"
    local _, cur = s:request("GET", path)
    local kit_before = json.decode(cur)
    local code, text = s:request("PUT", path, json.encode(put(kit_before.metadata.resourceVersion)))
    assert.are.equal(200, code)
    local kit = json.decode(text)
    local diff = differences(normal(real, real), normal(kit, real))
    assert(#diff == 0, "Service s6 differs (real | kit):\n" .. table.concat(diff, "\n"))
    assert.are.same({ before.spec.clusterIP, before.spec.ports[1].nodePort },
      { real.spec.clusterIP, real.spec.ports[1].nodePort })
    assert.are.same({ kit_before.spec.clusterIP, kit_before.spec.ports[1].nodePort },
      { kit.spec.clusterIP, kit.spec.ports[1].nodePort })
  end)

  it("updates (PUT) a DaemonSet: its template generation counted when the template changes, kept when it does not",
    function()
    local function ds(image, rv, labels)
      return { apiVersion = "apps/v1", kind = "DaemonSet", metadata = { name = "ds2", resourceVersion = rv, labels = labels },
        spec = { selector = { matchLabels = { a = "ds2" } }, template = { metadata = { labels = { a = "ds2" } },
          spec = { containers = { { name = "c", image = image } } } } } }
    end
    both(ds("nginx"))
    local path = "/apis/apps/v1/namespaces/" .. ns .. "/daemonsets/ds2"
    for _, step in ipairs { { "busybox" }, { "busybox", { x = "y" } } } do
      local real = printed(kube.must({ "replace", "-n", ns, "-o", "json", "-f", "-" },
        json.encode(ds(step[1], kube.get("daemonset", "ds2", ns).metadata.resourceVersion, step[2]))))
      local _, cur = s:request("GET", path)
      local code, text = s:request("PUT", path, json.encode(ds(step[1], json.decode(cur).metadata.resourceVersion, step[2])))
      assert.are.equal(200, code)
      local want, got = normal(real, real), normal(json.decode(text), real)
      want.status, got.status = nil, nil -- the controller's by now
      assert.are.same(want.metadata, got.metadata)
      assert.are.equal("2", got.metadata.annotations["deprecated.daemonset.template.generation"])
    end
  end)

  it("stores a ResourceQuota's quantities canonical and its status an empty struct", function()
    same { apiVersion = "v1", kind = "ResourceQuota", metadata = { name = "q1" }, spec = { hard = {
      ["requests.cpu"] = "0.5", ["requests.memory"] = "1.5Gi", pods = "10", ["limits.cpu"] = "1000m",
      ["limits.memory"] = "0.1Ki", persistentvolumeclaims = "1e3", ["count/configmaps"] = "100" } } }
  end)

  it("updates (PUT) a ResourceQuota of \"0.5\" to what the API server stores: 500m", function()
    local kit, real = both { apiVersion = "v1", kind = "ResourceQuota", metadata = { name = "q2" },
      spec = { hard = { ["requests.cpu"] = "1" } } }
    local function put(rv)
      return { apiVersion = "v1", kind = "ResourceQuota", metadata = { name = "q2", resourceVersion = rv },
        spec = { hard = { ["requests.cpu"] = "0.5", ["limits.cpu"] = "1.50" } } }
    end
    local raw_real = kube.get("resourcequota", "q2", ns)
    local out = kube.must({ "replace", "-n", ns, "-o", "json", "-f", "-" },
      json.encode(put(raw_real.metadata.resourceVersion)))
    local real2 = printed(out)
    local path = "/api/v1/namespaces/" .. ns .. "/resourcequotas/q2"
    local _, cur = s:request("GET", path)
    local code, text = s:request("PUT", path, json.encode(put(json.decode(cur).metadata.resourceVersion)))
    assert.are.equal(200, code)
    -- (the quota controller has written the real one's status by now)
    local want, got = normal(real2, real2), normal(json.decode(text), real2)
    want.status, got.status = nil, nil
    assert.are.same(want, got)
    assert.are.same({ "500m", "1500m" }, { real2.spec.hard["requests.cpu"], real2.spec.hard["limits.cpu"] })
    assert.are_not.same(kit, real2) -- it changed
    assert.is_table(real)
  end)

  it("patches as it stores: a Deployment's template (strategic), a ResourceQuota (merge), a NetworkPolicy (apply)",
    function()
    local kit_ns = "/namespaces/" .. ns .. "/"
    -- the kit's answer to a patch of path: the object, normalised against real
    local function kit_patch(path, patch, ctype)
      local code, text = s:request("PATCH", path, json.encode(patch), ctype)
      assert(code == 200 or code == 201, ("the kit answered %d: %s"):format(code, text))
      return json.decode(text)
    end
    local function spec_of(obj) return normal({ metadata = obj.metadata, spec = obj.spec }, obj).spec end
    both { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "dp" }, spec = {
      selector = { matchLabels = { app = "dp" } }, template = { metadata = { labels = { app = "dp" } }, spec = pod_spec() } } }
    both { apiVersion = "v1", kind = "ResourceQuota", metadata = { name = "qp" }, spec = { hard = { pods = "100" } } }
    local restart = { spec = { template = { metadata = { annotations = { ["kubectl.kubernetes.io/restartedAt"] = "now" } },
      spec = { containers = { { name = "c", resources = { limits = { cpu = "0.75" } } } } } } } }
    local real = printed(kube.must({ "patch", "deployment", "dp", "-n", ns, "--type=strategic", "-o", "json",
      "-p", json.encode(restart) }))
    local kit = kit_patch("/apis/apps/v1" .. kit_ns .. "deployments/dp", restart, "application/strategic-merge-patch+json")
    assert.are.same(spec_of(real), spec_of(kit))
    assert.are.equal("750m", kit.spec.template.spec.containers[1].resources.limits.cpu)
    local quota = { spec = { hard = { pods = "2.0", ["requests.cpu"] = "0.25" } } }
    real = printed(kube.must({ "patch", "resourcequota", "qp", "-n", ns, "--type=merge", "-o", "json",
      "-p", json.encode(quota) }))
    kit = kit_patch("/api/v1" .. kit_ns .. "resourcequotas/qp", quota, "application/merge-patch+json")
    assert.are.same(spec_of(real), spec_of(kit))
    local policy = { apiVersion = "networking.k8s.io/v1", kind = "NetworkPolicy", metadata = { name = "n3" },
      spec = { podSelector = {}, ingress = { { ports = { { port = 8080 } } } } } }
    for _ = 1, 2 do -- a create, then an apply of the same that changes nothing
      real = printed(kube.must({ "apply", "--server-side", "--field-manager", "parity", "-n", ns, "-o", "json",
        "-f", "-" }, json.encode(policy)))
      kit = kit_patch("/apis/networking.k8s.io/v1" .. kit_ns .. "networkpolicies/n3?fieldManager=parity", policy,
        "application/apply-patch+yaml")
      assert.are.same(spec_of(real), spec_of(kit))
    end
  end)

  it("stores a LimitRange with its Container defaults filled from max and default", function()
    same { apiVersion = "v1", kind = "LimitRange", metadata = { name = "l1" }, spec = { limits = {
      { type = "Container", default = { cpu = "0.5" }, defaultRequest = { memory = "1e3" }, max = { cpu = "+2",
        memory = "1Gi" }, maxLimitRequestRatio = { cpu = "2.0" } },
      { type = "Pod", max = { cpu = "4" } } } } }
  end)

  it("stores a NetworkPolicy with its policy types and ports' protocol", function()
    same { apiVersion = "networking.k8s.io/v1", kind = "NetworkPolicy", metadata = { name = "n1" },
      spec = { podSelector = {}, ingress = { { ports = { { port = 80 } } } } } }
    same { apiVersion = "networking.k8s.io/v1", kind = "NetworkPolicy", metadata = { name = "n2" },
      spec = { podSelector = { matchLabels = { a = "b" } }, egress = { { ports = { { port = 53, protocol = "UDP" } } } } } }
  end)

  it("stores a Job with its selector and labels from its uid, and a CronJob", function()
    same { apiVersion = "batch/v1", kind = "Job", metadata = { name = "j1" }, spec = { template = { spec = pod_spec {
      restartPolicy = "Never" } } } }
    same { apiVersion = "batch/v1", kind = "CronJob", metadata = { name = "cj1" }, spec = { schedule = "*/5 * * * *",
      jobTemplate = { spec = { template = { spec = pod_spec { restartPolicy = "OnFailure" } } } } } }
  end)

  it("stores a Lease, a ServiceAccount, a Role and a RoleBinding as sent", function()
    same { apiVersion = "coordination.k8s.io/v1", kind = "Lease", metadata = { name = "l1" },
      spec = { holderIdentity = "a", leaseDurationSeconds = 15 } }
    for _, obj in ipairs(manifests("manifests/rbac/service_account.yaml")) do same(obj) end
    for _, obj in ipairs(manifests("manifests/rbac/leader_election_role.yaml")) do same(obj) end
  end)

  it("stores an Event (core v1 and events.k8s.io/v1) with its unset times null", function()
    same { apiVersion = "v1", kind = "Event", metadata = { name = "e1" }, involvedObject = { kind = "Pod", name = "p1",
      namespace = ns }, reason = "Test", message = "hello", type = "Normal" }
    same { apiVersion = "events.k8s.io/v1", kind = "Event", metadata = { name = "e2" },
      eventTime = "2026-01-01T00:00:00.000000Z", reportingController = "x.io/c", reportingInstance = "i",
      action = "Act", reason = "Test", regarding = { kind = "Pod", name = "p1", namespace = ns }, type = "Normal" }
  end)

  it("stores a RoleBinding's subjects, a HorizontalPodAutoscaler, a PodDisruptionBudget, an Ingress, a ReplicationController "
    .. "and Endpoints defaulted", function()
    same { apiVersion = "rbac.authorization.k8s.io/v1", kind = "RoleBinding", metadata = { name = "rb1" },
      roleRef = { apiGroup = "rbac.authorization.k8s.io", kind = "Role", name = "r" },
      subjects = { { kind = "User", name = "alice" }, { kind = "Group", name = "devs" },
        { kind = "ServiceAccount", name = "default" } } }
    same { apiVersion = "autoscaling/v2", kind = "HorizontalPodAutoscaler", metadata = { name = "h1" },
      spec = { scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "d1" }, maxReplicas = 5,
        metrics = { { type = "Resource", resource = { name = "cpu", target = { type = "AverageValue",
          averageValue = 0.5 } } } } } }
    -- no metric: CPU at 80%; a behavior: each direction's rules filled
    same { apiVersion = "autoscaling/v2", kind = "HorizontalPodAutoscaler", metadata = { name = "h2" },
      spec = { scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "d1" }, maxReplicas = 5 } }
    same { apiVersion = "autoscaling/v2", kind = "HorizontalPodAutoscaler", metadata = { name = "h3" },
      spec = { scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "d1" }, maxReplicas = 5,
        behavior = { scaleDown = { stabilizationWindowSeconds = 60 } } } }
    same { apiVersion = "autoscaling/v2", kind = "HorizontalPodAutoscaler", metadata = { name = "h4" },
      spec = { scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = "d1" }, maxReplicas = 5,
        behavior = { scaleUp = { policies = { { type = "Pods", value = 1, periodSeconds = 60 } } } } } }
    same { apiVersion = "policy/v1", kind = "PodDisruptionBudget", metadata = { name = "pdb1" },
      spec = { minAvailable = 1, selector = { matchLabels = { a = "b" } } } }
    same { apiVersion = "networking.k8s.io/v1", kind = "Ingress", metadata = { name = "i1" },
      spec = { rules = { { host = "a.example.com", http = { paths = { { path = "/", pathType = "Prefix",
        backend = { service = { name = "s1", port = { number = 80 } } } } } } } } } }
    same { apiVersion = "v1", kind = "ReplicationController", metadata = { name = "rc1" },
      spec = { template = { metadata = { labels = { a = "rc" } }, spec = pod_spec() } } }
    same { apiVersion = "v1", kind = "Endpoints", metadata = { name = "ep1" },
      subsets = { { addresses = { { ip = "10.1.2.3" } }, ports = { { port = 80 } } } } }
  end)

  it("stores a PersistentVolumeClaim with its protection finalizer, volume mode and canonical request", function()
    same { apiVersion = "v1", kind = "PersistentVolumeClaim", metadata = { name = "c1" },
      spec = { accessModes = { "ReadWriteOnce" }, resources = { requests = { storage = "1.5Gi" } } } }
  end)

  it("stores the samples of the CRDs At, Machine and Switch as sent", function()
    assert.are.same({ "At", "Machine", "Switch" }, crds)
    for _, f in ipairs { "at", "machine", "switch" } do
      for _, obj in ipairs(manifests("manifests/samples/" .. f .. ".yaml")) do same(obj) end
    end
  end)

  it("prunes the fields a CRD's schema does not name: an At's unknown spec, top-level and status fields, and a "
    .. "condition's", function()
    local at = { apiVersion = "cnat.programming-kubernetes.info/v1alpha1", kind = "At", metadata = { name = "pruned" },
      spec = { schedule = "2026-11-25T11:00:00Z", command = "echo hi", extra = 1, nested = { a = 1 } }, extra = "top",
      status = { phase = "PENDING" } }
    -- (kubectl's own validation would refuse the unknown fields: the server's pruning is the point)
    local real = normal(printed(kube.must({ "create", "--validate=false", "-n", ns, "-o", "json", "-f", "-" },
      json.encode(at))))
    local code, text = s:request("POST", kit_path(s, at, ns), json.encode(at))
    assert(code == 201, text)
    local kit = normal(json.decode(text))
    assert.are.same({}, differences(real, kit))
    assert.are.same({ schedule = "2026-11-25T11:00:00Z", command = "echo hi" }, kit.spec)
    assert.is_nil(kit.extra)
    local status = { status = { phase = "PENDING", bogus = 1, conditions = { { type = "Ready", status = "False",
      reason = "Pending", message = "", lastTransitionTime = "2026-11-25T10:00:00Z", bogus = 2 } } } }
    real = normal(printed(kube.must({ "patch", "at", "pruned", "-n", ns, "--subresource=status", "--type=merge",
      "-o", "json", "-p", json.encode(status) })))
    code, text = s:request("PATCH", kit_path(s, at, ns) .. "/pruned/status", json.encode(status),
      "application/merge-patch+json")
    assert(code == 200, text)
    kit = normal(json.decode(text))
    assert.are.same({}, differences(real.status, kit.status))
    assert.is_nil(kit.status.bogus)
    assert.is_nil(kit.status.conditions[1].bogus)
  end)
end)
