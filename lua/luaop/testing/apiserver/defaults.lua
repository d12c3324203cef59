-- luaop.testing.apiserver.defaults - what kube-apiserver v1.37 fills in and rewrites in an
-- object it stores, for the built-in kinds operators write most: the
-- defaults of pkg/apis/*/v1/defaults.go, quantities in canonical form
-- ("0.5" -> "500m"), the empty structs its encoding writes ("status": {}),
-- what its strategies set on create (a Job's selector, a DaemonSet's
-- template generation) and its default admission plugins add (a Pod's
-- ServiceAccount token, tolerations, priority; a claim's protection
-- finalizer); a part of luaop.testing.apiserver.
--
--   local failure = defaults.apply(server, k, obj, "create" | "update", namespace [, old])
--
-- Changes obj in place; returns nil, or the failure the API server would
-- answer (a quantity it cannot read: 400; a ServiceAccount or PriorityClass
-- a new Pod names that does not exist: 403). Kinds it does not know pass
-- untouched. What it leaves out is in docs/testing.md ("What the kit
-- approximates").
local core = require "luaop.core"
local json = core.json
local array, is_array, null = json.array, json.is_array, json.null
local values_part = require "luaop.testing.apiserver.values"
local is_object, nonempty = values_part.is_object, values_part.nonempty
local status_part = require "luaop.testing.apiserver.status"
local bad_request, forbidden = status_part.bad_request, status_part.forbidden
local quantity = require "luaop.testing.apiserver.quantity"
local podspec = require "luaop.testing.apiserver.podspec"
local claim_spec, resource_list, template = podspec.claim_spec, podspec.resource_list, podspec.template

local M = {}

local obj_at, each, default = podspec.obj_at, podspec.each, podspec.default
local base64 = require("luaop.base64").encode -- (a Secret's stringData)

-- ---- the kinds ------------------------------------------------------------------------

-- Each: function(server, obj, op, ns) -> nil | error message (a 400) | {forbidden = why}
local KINDS = {}

KINDS["/Pod"] = function(server, obj, op, ns)
  local ok, err = podspec.pod(obj)
  if not ok then return err end
  if op == "create" then
    local why = podspec.admit(server, obj, ns)
    if why then return { forbidden = why } end
  elseif is_object(obj.status) and obj.status.qosClass == nil then
    -- set on create and immutable after: a seeded or updated Pod has one too
    obj.status.qosClass = podspec.qos_class(obj.spec)
  end
end

KINDS["/PodTemplate"] = function(_, obj)
  local ok, err = template(obj_at(obj, "template"))
  if not ok then return err end
end

KINDS["/Secret"] = function(_, obj)
  if not nonempty(obj.type) then obj.type = "Opaque" end
  -- stringData is write-only: merged into data, base64-encoded
  if is_object(obj.stringData) then
    local data = obj_at(obj, "data")
    for key, v in pairs(obj.stringData) do
      if type(v) == "string" then data[key] = base64(v) end
    end
    obj.stringData = nil
  end
end

-- What an update of a Service keeps of the old one's allocations when it
-- leaves them out (the registry's patchAllocatedValues): its cluster IPs and
-- families, and each port's nodePort by the port's name.
local function keep_allocated(spec, old)
  local ospec = is_object(old) and is_object(old.spec) and old.spec
  if not ospec or ospec.type == "ExternalName" or spec.type == "ExternalName" then return end
  if not nonempty(spec.clusterIP) then spec.clusterIP = ospec.clusterIP end
  if not is_array(spec.clusterIPs) then spec.clusterIPs = ospec.clusterIPs end
  if spec.ipFamilyPolicy == nil then spec.ipFamilyPolicy = ospec.ipFamilyPolicy end
  if spec.ipFamilies == nil then spec.ipFamilies = ospec.ipFamilies end
  local used, by_name = {}, {}
  for _, p in each(spec.ports) do
    if is_object(p) and p.nodePort then used[p.nodePort] = true end
  end
  for _, p in each(ospec.ports) do
    if is_object(p) and p.nodePort then by_name[p.name or ""] = p.nodePort end
  end
  for _, p in each(spec.ports) do
    local was = is_object(p) and (p.nodePort == nil or p.nodePort == 0) and by_name[p.name or ""]
    if was and not used[was] then p.nodePort = was end
  end
end

KINDS["/Service"] = function(server, obj, _, _, _, old)
  local spec = obj_at(obj, "spec")
  if not nonempty(spec.type) then spec.type = "ClusterIP" end
  keep_allocated(spec, old)
  if not nonempty(spec.sessionAffinity) then spec.sessionAffinity = "None" end
  if spec.sessionAffinity == "None" then spec.sessionAffinityConfig = nil end
  if spec.sessionAffinity == "ClientIP" then
    local cfg = obj_at(spec, "sessionAffinityConfig")
    default(obj_at(cfg, "clientIP"), "timeoutSeconds", 10800)
  end
  local t = spec.type
  for _, p in each(spec.ports) do
    if is_object(p) then
      if not nonempty(p.protocol) then p.protocol = "TCP" end
      if p.targetPort == nil or p.targetPort == 0 or p.targetPort == "" then p.targetPort = p.port end
      if (t == "NodePort" or t == "LoadBalancer") and (p.nodePort == nil or p.nodePort == 0) then
        server._node_port = (server._node_port or 30000) + 1
        p.nodePort = server._node_port
      end
    end
  end
  if (t == "NodePort" or t == "LoadBalancer") and not nonempty(spec.externalTrafficPolicy) then
    spec.externalTrafficPolicy = "Cluster"
  end
  if t == "LoadBalancer" then default(spec, "allocateLoadBalancerNodePorts", true) end
  if t ~= "ExternalName" then
    default(spec, "internalTrafficPolicy", "Cluster")
    if not nonempty(spec.clusterIP) then
      -- an approximation of the allocator: 10.96.0.1 and on, in order
      server._cluster_ip = (server._cluster_ip or 0) + 1
      local n = server._cluster_ip
      spec.clusterIP = ("10.96.%d.%d"):format(n // 254, n % 254 + 1)
    end
    if nonempty(spec.clusterIP) and not is_array(spec.clusterIPs) then spec.clusterIPs = array { spec.clusterIP } end
    -- a headless Service with no selector takes both families (as on a single-stack cluster too)
    local both = spec.clusterIP == "None" and spec.selector == nil
    if not nonempty(spec.ipFamilyPolicy) then spec.ipFamilyPolicy = both and "RequireDualStack" or "SingleStack" end
    if not is_array(spec.ipFamilies) then
      spec.ipFamilies = both and array { "IPv4", "IPv6" } or array { "IPv4" }
    end
  end
  obj_at(obj_at(obj, "status"), "loadBalancer")
end

KINDS["/ResourceQuota"] = function(_, obj)
  local ok, err = resource_list(obj_at(obj, "spec").hard)
  local status = obj_at(obj, "status")
  if ok then ok, err = resource_list(status.hard) end
  if ok then ok, err = resource_list(status.used) end
  if not ok then return err end
end

KINDS["/LimitRange"] = function(_, obj)
  for _, item in each(obj_at(obj, "spec").limits) do
    if is_object(item) then
      for _, f in ipairs { "max", "min", "default", "defaultRequest", "maxLimitRequestRatio" } do
        local ok, err = resource_list(item[f])
        if not ok then return err end
      end
      if item.type == "Container" then
        local def, req = obj_at(item, "default"), obj_at(item, "defaultRequest")
        for key, v in pairs(is_object(item.max) and item.max or {}) do default(def, key, v) end
        for key, v in pairs(def) do default(req, key, v) end
        for key, v in pairs(is_object(item.min) and item.min or {}) do default(req, key, v) end
        if next(def) == nil then item.default = nil end
        if next(req) == nil then item.defaultRequest = nil end
      end
    end
  end
end

-- The finalizer a protection admission plugin puts on a new object (once).
local function protect(obj, finalizer)
  local md = obj.metadata
  local fins = is_array(md.finalizers) and md.finalizers or array()
  for _, f in ipairs(fins) do
    if f == finalizer then return end
  end
  fins[#fins + 1] = finalizer
  md.finalizers = fins
end

KINDS["/PersistentVolumeClaim"] = function(_, obj, op)
  local ok, err = claim_spec(obj_at(obj, "spec"))
  local status = obj_at(obj, "status")
  if not nonempty(status.phase) then status.phase = "Pending" end
  if ok then ok, err = resource_list(status.capacity) end
  if not ok then return err end
  -- StorageObjectInUseProtection admission
  if op == "create" then protect(obj, "kubernetes.io/pvc-protection") end
end

KINDS["/PersistentVolume"] = function(_, obj, op)
  local spec = obj_at(obj, "spec")
  local ok, err = resource_list(spec.capacity)
  if not ok then return err end
  if not nonempty(spec.persistentVolumeReclaimPolicy) then spec.persistentVolumeReclaimPolicy = "Retain" end
  default(spec, "volumeMode", "Filesystem")
  local status = obj_at(obj, "status")
  if not nonempty(status.phase) then status.phase = "Pending" end
  if op == "create" then protect(obj, "kubernetes.io/pv-protection") end
end

KINDS["/Node"] = function(_, obj)
  local status = obj_at(obj, "status")
  local ok, err = resource_list(status.capacity)
  if ok then ok, err = resource_list(status.allocatable) end
  if not ok then return err end
  if status.allocatable == nil and is_object(status.capacity) then
    status.allocatable = {}
    for key, v in pairs(status.capacity) do status.allocatable[key] = v end
  end
end

KINDS["/Event"] = function(_, obj)
  for _, f in ipairs { "eventTime", "firstTimestamp", "lastTimestamp" } do default(obj, f, null) end
  default(obj, "reportingComponent", "")
  default(obj, "reportingInstance", "")
  obj_at(obj, "source")
  obj_at(obj, "involvedObject")
end

KINDS["events.k8s.io/Event"] = function(_, obj)
  default(obj, "deprecatedFirstTimestamp", null)
  default(obj, "deprecatedLastTimestamp", null)
  obj_at(obj, "deprecatedSource")
end

local function policy_ports(rules)
  for _, rule in each(rules) do
    for _, p in each(is_object(rule) and rule.ports) do
      if is_object(p) and not nonempty(p.protocol) then p.protocol = "TCP" end
    end
  end
end

KINDS["networking.k8s.io/NetworkPolicy"] = function(_, obj)
  local spec = obj_at(obj, "spec")
  obj_at(spec, "podSelector")
  policy_ports(spec.ingress)
  policy_ports(spec.egress)
  if not is_array(spec.policyTypes) or #spec.policyTypes == 0 then
    spec.policyTypes = array { "Ingress" }
    if is_array(spec.egress) and #spec.egress > 0 then spec.policyTypes[2] = "Egress" end
  end
end

KINDS["/ReplicationController"] = function(_, obj)
  local spec = obj_at(obj, "spec")
  default(spec, "replicas", 1)
  local labels = is_object(spec.template) and is_object(spec.template.metadata) and spec.template.metadata.labels
  if is_object(labels) and next(labels) ~= nil then
    local function copy_of() local t = {} for key, v in pairs(labels) do t[key] = v end return t end
    if not is_object(spec.selector) or next(spec.selector) == nil then spec.selector = copy_of() end
    if not is_object(obj.metadata.labels) or next(obj.metadata.labels) == nil then obj.metadata.labels = copy_of() end
  end
  default(obj_at(obj, "status"), "replicas", 0)
  if is_object(spec.template) then
    local ok, err = template(spec.template)
    if not ok then return err end
  end
end

KINDS["/Endpoints"] = function(_, obj)
  for _, subset in each(obj.subsets) do
    for _, p in each(is_object(subset) and subset.ports) do
      if is_object(p) and not nonempty(p.protocol) then p.protocol = "TCP" end
    end
  end
end

-- RBAC subjects: a User's and a Group's API group
local function subjects(_, obj)
  for _, sub in each(obj.subjects) do
    if is_object(sub) and sub.apiGroup == nil and (sub.kind == "User" or sub.kind == "Group") then
      sub.apiGroup = "rbac.authorization.k8s.io"
    end
  end
end
KINDS["rbac.authorization.k8s.io/RoleBinding"] = subjects
KINDS["rbac.authorization.k8s.io/ClusterRoleBinding"] = subjects

KINDS["autoscaling/HorizontalPodAutoscaler"] = function(_, obj, _, _, k)
  if k.version ~= "v2" then return end
  local spec = obj_at(obj, "spec")
  default(spec, "minReplicas", 1)
  -- (autoscaling/v2's defaults.go: CPU at 80% when no metric is given; a
  -- behavior given has each direction's rules filled, scale-down's
  -- stabilization window left to the controller's flag)
  if not is_array(spec.metrics) or #spec.metrics == 0 then
    spec.metrics = array { { type = "Resource", resource = { name = "cpu",
      target = { type = "Utilization", averageUtilization = 80 } } } }
  end
  if is_object(spec.behavior) then
    local b = spec.behavior
    for _, dir in ipairs { "scaleUp", "scaleDown" } do
      local rules = is_object(b[dir]) and b[dir] or {}
      b[dir] = rules
      default(rules, "selectPolicy", "Max")
      if dir == "scaleUp" then default(rules, "stabilizationWindowSeconds", 0) end
      if rules.policies == nil or rules.policies == null then
        rules.policies = dir == "scaleUp" and array { { type = "Pods", value = 4, periodSeconds = 15 },
          { type = "Percent", value = 100, periodSeconds = 15 } } or array { { type = "Percent", value = 100,
          periodSeconds = 15 } }
      end
    end
  end
  for _, m in each(spec.metrics) do
    for _, src in ipairs { "resource", "pods", "object", "external", "containerResource" } do
      local target = is_object(m) and is_object(m[src]) and m[src].target
      for _, f in ipairs { "value", "averageValue" } do
        if is_object(target) and target[f] ~= nil then
          local q, err = quantity.canonical(target[f])
          if not q then return err end
          target[f] = q
        end
      end
    end
  end
  local status = obj_at(obj, "status")
  default(status, "currentMetrics", null)
  default(status, "desiredReplicas", 0)
end

KINDS["policy/PodDisruptionBudget"] = function(_, obj)
  local status = obj_at(obj, "status")
  for _, f in ipairs { "currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods" } do
    default(status, f, 0)
  end
end

KINDS["networking.k8s.io/Ingress"] = function(_, obj)
  obj_at(obj_at(obj, "status"), "loadBalancer")
end

-- Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob
for key, f in pairs(require("luaop.testing.apiserver.workloads")) do KINDS[key] = f end

-- Apply what the API server does to obj of kind k (see the header).
function M.apply(server, k, obj, op, ns, old)
  local f = KINDS[k.group .. "/" .. k.kind]
  if not f or k.custom then return nil end
  local err = f(server, obj, op, ns or obj.metadata.namespace, k, old)
  if err == nil then return nil end
  local name = obj.metadata.name or ""
  if type(err) == "table" then return forbidden(k, name, err.forbidden) end
  return bad_request(('%s in version "%s" cannot be handled as a %s: %s'):format(k.kind, k.version, k.kind, err))
end

-- Whether the kit knows kind k's defaults.
function M.knows(k)
  return KINDS[k.group .. "/" .. k.kind] ~= nil and not k.custom
end

M.canonical_quantity = quantity.canonical
return M
