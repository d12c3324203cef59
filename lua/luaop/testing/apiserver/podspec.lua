-- luaop.testing.apiserver.podspec - what kube-apiserver v1.37 fills in a pod spec, a Pod's
-- and every pod template's (core/v1's defaults), and what its default
-- admission plugins add to a new Pod (ServiceAccount, DefaultTolerationSeconds,
-- Priority); a part of luaop.testing.apiserver, used by its defaults.
local core = require "luaop.core"
local json = core.json
local array, is_array = json.array, json.is_array
local values_part = require "luaop.testing.apiserver.values"
local is_object, nonempty = values_part.is_object, values_part.nonempty
local quantity = require "luaop.testing.apiserver.quantity"

local M = {}

local function obj_at(t, key)
  if not is_object(t[key]) then t[key] = {} end
  return t[key]
end

local function each(list)
  return ipairs(is_array(list) and list or {})
end

local function default(t, key, v)
  if t[key] == nil then t[key] = v end
end

-- (for the other parts of the defaults)
M.obj_at, M.each, M.default = obj_at, each, default

-- Canonical quantities in a ResourceList (rounded up to the milli, as
-- SetDefaults_ResourceList does) | nil, error message.
function M.resource_list(list)
  if not is_object(list) then return true end
  for key, v in pairs(list) do
    local q, err = quantity.canonical(v, true)
    if not q then return nil, err end
    list[key] = q
  end
  return true
end

-- requests and limits of a ResourceRequirements.
function M.requirements(r)
  if not is_object(r) then return true end
  local ok, err = M.resource_list(r.requests)
  if ok then ok, err = M.resource_list(r.limits) end
  return ok, err
end

-- The tag of an image reference, as the kubelet's parsers.ParseImageName
-- reads it ("latest" when none is given and there is no digest).
local function image_tag(image)
  if type(image) ~= "string" then return "latest" end
  local name = image:match("^([^@]*)@") or image
  local last = name:match("[^/]*$")
  local tag = last:match(":(.*)$")
  if tag then return tag end
  return image:find("@", 1, true) and "" or "latest"
end

local function probe(p)
  if not is_object(p) then return end
  if p.timeoutSeconds == nil or p.timeoutSeconds == 0 then p.timeoutSeconds = 1 end
  if p.periodSeconds == nil or p.periodSeconds == 0 then p.periodSeconds = 10 end
  if p.successThreshold == nil or p.successThreshold == 0 then p.successThreshold = 1 end
  if p.failureThreshold == nil or p.failureThreshold == 0 then p.failureThreshold = 3 end
  if is_object(p.httpGet) then
    if not nonempty(p.httpGet.path) then p.httpGet.path = "/" end
    if not nonempty(p.httpGet.scheme) then p.httpGet.scheme = "HTTP" end
  end
end

local function handler(h)
  if is_object(h) and is_object(h.httpGet) then
    if not nonempty(h.httpGet.path) then h.httpGet.path = "/" end
    if not nonempty(h.httpGet.scheme) then h.httpGet.scheme = "HTTP" end
  end
end

local function container(c, host_network)
  if not is_object(c) then return true end
  if not nonempty(c.imagePullPolicy) then
    c.imagePullPolicy = image_tag(c.image) == "latest" and "Always" or "IfNotPresent"
  end
  if not nonempty(c.terminationMessagePath) then c.terminationMessagePath = "/dev/termination-log" end
  if not nonempty(c.terminationMessagePolicy) then c.terminationMessagePolicy = "File" end
  for _, p in each(c.ports) do
    if is_object(p) then
      if not nonempty(p.protocol) then p.protocol = "TCP" end
      if host_network and (p.hostPort == nil or p.hostPort == 0) then p.hostPort = p.containerPort end
    end
  end
  for _, e in each(c.env) do
    local ref = is_object(e) and is_object(e.valueFrom) and e.valueFrom.fieldRef
    if is_object(ref) and not nonempty(ref.apiVersion) then ref.apiVersion = "v1" end
  end
  probe(c.livenessProbe)
  probe(c.readinessProbe)
  probe(c.startupProbe)
  if is_object(c.lifecycle) then
    handler(c.lifecycle.postStart)
    handler(c.lifecycle.preStop)
  end
  obj_at(c, "resources")
  return M.requirements(c.resources)
end

local function volume(v)
  if not is_object(v) then return true end
  local any = false
  for key in pairs(v) do
    if key ~= "name" then any = true end
  end
  if not any then v.emptyDir = {} end
  for _, s in ipairs { "secret", "configMap", "projected", "downwardAPI" } do
    if is_object(v[s]) and v[s].defaultMode == nil then v[s].defaultMode = 420 end
  end
  if is_object(v.projected) then
    for _, src in each(v.projected.sources) do
      local t = is_object(src) and src.serviceAccountToken
      if is_object(t) and t.expirationSeconds == nil then t.expirationSeconds = 3600 end
      local d = is_object(src) and src.downwardAPI
      for _, item in each(is_object(d) and d.items) do
        local ref = is_object(item) and item.fieldRef
        if is_object(ref) and not nonempty(ref.apiVersion) then ref.apiVersion = "v1" end
      end
    end
  end
  if is_object(v.downwardAPI) then
    for _, item in each(v.downwardAPI.items) do
      local ref = is_object(item) and item.fieldRef
      if is_object(ref) and not nonempty(ref.apiVersion) then ref.apiVersion = "v1" end
    end
  end
  if is_object(v.hostPath) and v.hostPath.type == nil then v.hostPath.type = "" end
  if is_object(v.emptyDir) and v.emptyDir.sizeLimit ~= nil then
    local q, err = quantity.canonical(v.emptyDir.sizeLimit)
    if not q then return nil, err end
    v.emptyDir.sizeLimit = q
  end
  local e = is_object(v.ephemeral) and v.ephemeral.volumeClaimTemplate
  if is_object(e) and is_object(e.spec) then
    if e.spec.volumeMode == nil then e.spec.volumeMode = "Filesystem" end
    return M.requirements(e.spec.resources)
  end
  return true
end

-- SetDefaults_PodSpec and what it reaches (containers, volumes, probes):
-- a Pod's spec and every template's | nil, error message.
function M.spec(spec)
  if not is_object(spec) then return true end
  if not nonempty(spec.dnsPolicy) then spec.dnsPolicy = "ClusterFirst" end
  if not nonempty(spec.restartPolicy) then spec.restartPolicy = "Always" end
  obj_at(spec, "securityContext")
  if spec.terminationGracePeriodSeconds == nil then spec.terminationGracePeriodSeconds = 30 end
  if not nonempty(spec.schedulerName) then spec.schedulerName = "default-scheduler" end
  -- serviceAccount, deprecated, is written as serviceAccountName is (read when that is empty)
  if not nonempty(spec.serviceAccountName) and nonempty(spec.serviceAccount) then
    spec.serviceAccountName = spec.serviceAccount
  end
  if nonempty(spec.serviceAccountName) then spec.serviceAccount = spec.serviceAccountName end
  for _, list in ipairs { "initContainers", "containers", "ephemeralContainers" } do
    for _, c in each(spec[list]) do
      local ok, err = container(c, false)
      if not ok then return nil, err end
    end
  end
  for _, v in each(spec.volumes) do
    local ok, err = volume(v)
    if not ok then return nil, err end
  end
  local ok, err = M.resource_list(spec.overhead)
  if ok then ok, err = M.requirements(spec.resources) end
  return ok, err
end

-- A claim's spec (a PersistentVolumeClaim's, a template's): its volume mode and canonical resources.
function M.claim_spec(spec)
  default(spec, "volumeMode", "Filesystem")
  return M.requirements(spec.resources)
end

-- A pod template (metadata always there, as an empty struct is written).
function M.template(t)
  if not is_object(t) then return true end
  obj_at(t, "metadata")
  return M.spec(obj_at(t, "spec"))
end

-- SetDefaults_Pod beyond the spec's: requests from limits, service links,
-- host ports.
function M.pod(pod)
  local spec = obj_at(pod, "spec")
  local ok, err = M.spec(spec)
  if not ok then return nil, err end
  for _, list in ipairs { "initContainers", "containers" } do
    for _, c in each(spec[list]) do
      local r = is_object(c) and c.resources
      if is_object(r) and is_object(r.limits) then
        r.requests = is_object(r.requests) and r.requests or {}
        for key, v in pairs(r.limits) do
          if r.requests[key] == nil then r.requests[key] = v end
        end
      end
      if spec.hostNetwork == true and is_object(c) then
        for _, p in each(c.ports) do
          if is_object(p) and (p.hostPort == nil or p.hostPort == 0) then p.hostPort = p.containerPort end
        end
      end
    end
  end
  if spec.enableServiceLinks == nil then spec.enableServiceLinks = true end
  return true
end

-- ---- status.qosClass, as pkg/apis/core/helper/qos computes it -----------------------------

local function nonzero(q)
  return type(q) == "string" and (quantity.canonical(q) or "0") ~= "0" and not q:match("^%-")
end

local function qos_class(spec)
  local requests, limits, guaranteed = {}, {}, true
  for _, list in ipairs { "initContainers", "containers" } do
    for _, c in each(spec[list]) do
      local r = is_object(c) and is_object(c.resources) and c.resources or {}
      local found = {}
      for _, res in ipairs { "cpu", "memory" } do
        local req = is_object(r.requests) and r.requests[res]
        if nonzero(req) then requests[res] = true end
        local lim = is_object(r.limits) and r.limits[res]
        if nonzero(lim) then
          limits[res] = true
          found[res] = true
        end
        if nonzero(req) and (not nonzero(lim) or quantity.canonical(req) ~= quantity.canonical(lim)) then
          guaranteed = false
        end
      end
      if not (found.cpu and found.memory) then guaranteed = false end
    end
  end
  if not next(requests) and not next(limits) then return "BestEffort" end
  -- (the real one compares the sums over containers; this, each container's)
  if guaranteed and requests.cpu and requests.memory then return "Guaranteed" end
  return "Burstable"
end

-- ---- admission of a new Pod --------------------------------------------------------------

-- A stored object of the kit's server (nil when it serves no such kind),
-- or with name nil all of them.
local function stored(server, gv, resource, ns, name)
  local g = server.gvs[gv]
  local k = g and g.kinds[resource]
  if not k then return name == nil and {} or nil end
  if name == nil then return server:_sorted(k) end
  return server:_find(k, ns, name)
end

local TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"

local function token_volume(name)
  return {
    name = name,
    projected = {
      defaultMode = 420,
      sources = array {
        { serviceAccountToken = { expirationSeconds = 3607, path = "token" } },
        { configMap = { name = "kube-root-ca.crt", items = array { { key = "ca.crt", path = "ca.crt" } } } },
        { downwardAPI = { items = array { { path = "namespace",
          fieldRef = { apiVersion = "v1", fieldPath = "metadata.namespace" } } } } },
      },
    },
  }
end

-- The ServiceAccount admission plugin: | nil, the reason it refuses.
-- server: the kit's (its stored ServiceAccounts, and _suffix for names).
local function service_account(server, pod, ns)
  local spec = pod.spec
  if is_object(pod.metadata.annotations) and pod.metadata.annotations["kubernetes.io/config.mirror"] then return end
  if not nonempty(spec.serviceAccountName) then
    spec.serviceAccountName = nonempty(spec.serviceAccount) and spec.serviceAccount or "default"
  end
  local sa = stored(server, "v1", "serviceaccounts", ns, spec.serviceAccountName)
  -- no controller-manager makes each namespace's "default": the kit takes it as made
  if not sa and spec.serviceAccountName ~= "default" then
    return ('error looking up service account %s/%s: serviceaccount "%s" not found')
      :format(ns, spec.serviceAccountName, spec.serviceAccountName)
  end
  sa = sa or {}
  spec.serviceAccount = spec.serviceAccountName
  local automount = spec.automountServiceAccountToken
  if automount == nil then automount = sa.automountServiceAccountToken end
  if automount ~= false then
    local name
    for _, v in each(spec.volumes) do
      if is_object(v) and type(v.name) == "string" and v.name:sub(1, 16) == "kube-api-access-" then name = v.name end
    end
    local existing = name ~= nil
    name = name or "kube-api-access-" .. server:_suffix()
    local needs = false
    for _, list in ipairs { "initContainers", "containers" } do
      for _, c in each(spec[list]) do
        if is_object(c) then
          local mounted = false
          for _, m in each(c.volumeMounts) do
            if is_object(m) and m.mountPath == TOKEN_PATH then mounted = true end
          end
          if not mounted then
            c.volumeMounts = is_array(c.volumeMounts) and c.volumeMounts or array()
            c.volumeMounts[#c.volumeMounts + 1] = { name = name, readOnly = true, mountPath = TOKEN_PATH }
            needs = true
          end
        end
      end
    end
    if needs and not existing then
      spec.volumes = is_array(spec.volumes) and spec.volumes or array()
      spec.volumes[#spec.volumes + 1] = token_volume(name)
    end
  end
  if (not is_array(spec.imagePullSecrets) or #spec.imagePullSecrets == 0) and is_array(sa.imagePullSecrets)
      and #sa.imagePullSecrets > 0 then
    spec.imagePullSecrets = array()
    for i, s in ipairs(sa.imagePullSecrets) do spec.imagePullSecrets[i] = { name = s.name } end
  end
end

-- DefaultTolerationSeconds: tolerate not-ready and unreachable nodes for 300 s.
local function default_tolerations(spec)
  local has = {}
  for _, t in each(spec.tolerations) do
    if is_object(t) and (t.effect == nil or t.effect == "" or t.effect == "NoExecute") then
      if not nonempty(t.key) then
        has.all = true
      else
        has[t.key] = true
      end
    end
  end
  for _, key in ipairs { "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable" } do
    if not has[key] and not has.all then
      spec.tolerations = is_array(spec.tolerations) and spec.tolerations or array()
      spec.tolerations[#spec.tolerations + 1] = { key = key, operator = "Exists", effect = "NoExecute",
        tolerationSeconds = 300 }
    end
  end
end

local SYSTEM_PRIORITIES = { ["system-node-critical"] = 2000001000, ["system-cluster-critical"] = 2000000000 }

-- Priority: the class's value (0 with no class and no global default).
local function priority(server, spec)
  local name = spec.priorityClassName
  local value, policy = 0, "PreemptLowerPriority"
  if nonempty(name) then
    local pc = stored(server, "scheduling.k8s.io/v1", "priorityclasses", nil, name)
    if pc then
      value, policy = pc.value or 0, pc.preemptionPolicy or policy
    elseif SYSTEM_PRIORITIES[name] then
      value = SYSTEM_PRIORITIES[name]
    else
      return ("no PriorityClass with name %s was found"):format(name)
    end
  else
    for _, pc in ipairs(stored(server, "scheduling.k8s.io/v1", "priorityclasses")) do
      if pc.globalDefault == true then
        spec.priorityClassName = pc.metadata.name
        value, policy = pc.value or 0, pc.preemptionPolicy or policy
      end
    end
  end
  if spec.priority == nil then spec.priority = value end
  if spec.preemptionPolicy == nil then spec.preemptionPolicy = policy end
end

-- What a new Pod gets on create: admission, then status | nil, why Forbidden.
function M.admit(server, pod, ns)
  local spec = obj_at(pod, "spec")
  local why = service_account(server, pod, ns)
  if why then return why end
  default_tolerations(spec)
  why = priority(server, spec)
  if why then return why end
  local status = obj_at(pod, "status")
  if not nonempty(status.phase) then status.phase = "Pending" end
  if status.qosClass == nil then status.qosClass = qos_class(spec) end
end

M.qos_class = qos_class
return M
