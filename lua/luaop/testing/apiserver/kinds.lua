-- luaop.testing.apiserver.kinds - the kinds served (built-in and from CRDs), discovery,
-- and paths to kinds; a part of luaop.testing.apiserver.
local core = require "luaop.core"
local json = core.json
local array = json.array
local values_part = require "luaop.testing.apiserver.values"
local copy, is_object, nonempty, without =
  values_part.copy, values_part.is_object, values_part.nonempty, values_part.without
local status_part = require "luaop.testing.apiserver.status"
local path_not_found = status_part.path_not_found

local Server = {} -- methods of the server (luaop.testing.apiserver)

-- ---- kinds and discovery ---------------------------------------------------------------

local VERBS = { "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch" }

-- Kubernetes' version order: GA before beta before alpha, higher first;
-- other names last, alphabetically.
local function version_rank(v)
  local major, stage, minor = v:match("^v(%d+)(%l*)(%d*)$")
  local s = stage == "" and minor == "" and 3 or stage == "beta" and 2 or stage == "alpha" and 1
  if not major or not s or (stage ~= "" and minor == "") then return 0, 0, 0 end
  return s, tonumber(major), tonumber(minor) or 0
end

local function version_before(a, b)
  local sa, ma, na = version_rank(a)
  local sb, mb, nb = version_rank(b)
  if sa ~= sb then return sa > sb end
  if ma ~= mb then return ma > mb end
  if na ~= nb then return na > nb end
  return a < b
end

local POD_FIELDS = {
  "metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
  "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
  "status.nominatedNodeName",
}
local EVENT_FIELDS = {
  "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
  "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
  "reportingComponent", "source", "type", "metadata.namespace", "metadata.name",
}

-- What the API server's strategies do to a new object beyond metadata.
local function prepare_namespace(obj)
  local md = obj.metadata
  md.labels = md.labels or {}
  md.labels["kubernetes.io/metadata.name"] = md.name
  obj.spec = is_object(obj.spec) and obj.spec or {}
  obj.spec.finalizers = array { "kubernetes" }
end

local function prepare_secret(obj)
  if not nonempty(obj.type) then obj.type = "Opaque" end
end

-- A namespace's spec.finalizers are the namespace controller's alone.
local function keep_namespace(new, old)
  new.spec = is_object(new.spec) and new.spec or {}
  new.spec.finalizers = copy(old.spec and old.spec.finalizers)
end

local BUILTIN = {
  { version = "v1", kind = "Namespace", resource = "namespaces", namespaced = false, status = true,
    status_on_create = { phase = "Active" }, name_rule = "label", field_labels = { "status.phase", "metadata.name" },
    prepare = prepare_namespace, keep_on_update = keep_namespace, short_names = { "ns" },
    return_deleted = true },
  { version = "v1", kind = "ConfigMap", resource = "configmaps", short_names = { "cm" } },
  { version = "v1", kind = "Secret", resource = "secrets", prepare = prepare_secret,
    field_labels = { "metadata.name", "metadata.namespace", "type" } },
  { version = "v1", kind = "Pod", resource = "pods", status = true,
    status_on_create = { phase = "Pending" }, field_labels = POD_FIELDS, short_names = { "po" },
    return_deleted = true },
  { version = "v1", kind = "Service", resource = "services", status = true, name_rule = "dns1035",
    field_labels = { "metadata.name", "metadata.namespace", "spec.clusterIP", "spec.type" }, short_names = { "svc" },
    return_deleted = true },
  { version = "v1", kind = "ServiceAccount", resource = "serviceaccounts", short_names = { "sa" },
    return_deleted = true },
  { version = "v1", kind = "Event", resource = "events", field_labels = EVENT_FIELDS,
    field_paths = { source = "source.component" }, short_names = { "ev" } },
  { version = "v1", kind = "Node", resource = "nodes", namespaced = false, status = true, status_on_create = "keep",
    field_labels = { "metadata.name", "spec.unschedulable" }, short_names = { "no" }, return_deleted = true },
  { group = "events.k8s.io", version = "v1", kind = "Event", resource = "events", short_names = { "ev" } },
  { group = "coordination.k8s.io", version = "v1", kind = "Lease", resource = "leases" },
  { group = "apps", version = "v1", kind = "Deployment", resource = "deployments", status = true,
    short_names = { "deploy" } },
  { group = "apiextensions.k8s.io", version = "v1", kind = "CustomResourceDefinition",
    resource = "customresourcedefinitions", namespaced = false, status = true, short_names = { "crd", "crds" } },
  -- more of what operators own or manifests hold
  { version = "v1", kind = "PersistentVolumeClaim", resource = "persistentvolumeclaims", status = true,
    short_names = { "pvc" } },
  { version = "v1", kind = "PersistentVolume", resource = "persistentvolumes", namespaced = false, status = true,
    short_names = { "pv" } },
  { version = "v1", kind = "Endpoints", resource = "endpoints", short_names = { "ep" } },
  { group = "apps", version = "v1", kind = "ReplicaSet", resource = "replicasets", status = true,
    short_names = { "rs" } },
  { group = "apps", version = "v1", kind = "StatefulSet", resource = "statefulsets", status = true,
    short_names = { "sts" } },
  { group = "apps", version = "v1", kind = "DaemonSet", resource = "daemonsets", status = true,
    short_names = { "ds" } },
  { group = "batch", version = "v1", kind = "Job", resource = "jobs", status = true },
  { group = "batch", version = "v1", kind = "CronJob", resource = "cronjobs", status = true, short_names = { "cj" } },
  { group = "rbac.authorization.k8s.io", version = "v1", kind = "Role", resource = "roles" },
  { group = "rbac.authorization.k8s.io", version = "v1", kind = "RoleBinding", resource = "rolebindings" },
  { group = "rbac.authorization.k8s.io", version = "v1", kind = "ClusterRole", resource = "clusterroles",
    namespaced = false },
  { group = "rbac.authorization.k8s.io", version = "v1", kind = "ClusterRoleBinding", resource = "clusterrolebindings",
    namespaced = false },
  { group = "networking.k8s.io", version = "v1", kind = "Ingress", resource = "ingresses", status = true,
    short_names = { "ing" } },
  { group = "networking.k8s.io", version = "v1", kind = "NetworkPolicy", resource = "networkpolicies",
    short_names = { "netpol" } },
  { group = "policy", version = "v1", kind = "PodDisruptionBudget", resource = "poddisruptionbudgets", status = true,
    short_names = { "pdb" } },
  { group = "discovery.k8s.io", version = "v1", kind = "EndpointSlice", resource = "endpointslices" },
  { group = "autoscaling", version = "v2", kind = "HorizontalPodAutoscaler", resource = "horizontalpodautoscalers",
    status = true, short_names = { "hpa" } },
  { group = "storage.k8s.io", version = "v1", kind = "StorageClass", resource = "storageclasses", namespaced = false,
    short_names = { "sc" } },
}

local DEFAULT_NAMESPACES = { "default", "kube-system", "kube-public", "kube-node-lease" }
-- NamespaceLifecycle refuses to delete these.
local IMMORTAL = { default = true, ["kube-system"] = true, ["kube-public"] = true }

local CRD_STORE = "apiextensions.k8s.io/customresourcedefinitions"

-- Register a kind (see the header). Re-adding a version's resource replaces it.
-- Extra fields: list_kind, singular, short_names, field_labels (every
-- field selector it takes; default metadata.name and metadata.namespace),
-- custom (a custom resource: no strategic merge patch, no unconditional
-- update), status_on_create ("keep", or the status a create starts with;
-- default: none), name_rule ("subdomain", "label", "dns1035"), return_deleted
-- (a DELETE answers with the object rather than a Status, as for Pods).
function Server:add_kind(spec)
  if type(spec) ~= "table" then error("add_kind needs a table", 2) end
  for _, f in ipairs { "version", "kind", "resource" } do
    if not nonempty(spec[f]) then error("add_kind needs " .. f, 2) end
  end
  local k = {
    group = spec.group or "", version = spec.version, kind = spec.kind, resource = spec.resource,
    namespaced = spec.namespaced ~= false, status = spec.status and true or false,
    list_kind = spec.list_kind or spec.kind .. "List", singular = spec.singular or spec.kind:lower(),
    short_names = spec.short_names, custom = spec.custom and true or false,
    status_on_create = spec.status_on_create, prepare = spec.prepare, keep_on_update = spec.keep_on_update,
    name_rule = spec.name_rule or "subdomain", field_paths = spec.field_paths or {}, crd = spec.crd,
    return_deleted = spec.return_deleted and true or false,
  }
  k.gv = k.group == "" and k.version or k.group .. "/" .. k.version
  k.store = k.group .. "/" .. k.resource
  k.unconditional = spec.unconditional_update
  if k.unconditional == nil then k.unconditional = not k.custom end
  k.strategic = spec.strategic
  if k.strategic == nil then k.strategic = not k.custom end
  k.field_labels, k.field_style = {}, spec.field_labels and "custom" or "default"
  for _, f in ipairs(spec.field_labels or { "metadata.name", "metadata.namespace" }) do k.field_labels[f] = true end

  local gv = self.gvs[k.gv]
  if not gv then
    gv = { group = k.group, version = k.version, gv = k.gv, kinds = {}, order = {} }
    self.gvs[k.gv] = gv
    if k.group ~= "" then
      local g = self.groups[k.group]
      if not g then
        g = { name = k.group, versions = {} }
        self.groups[k.group] = g
        self.group_order[#self.group_order + 1] = k.group
      end
      g.versions[#g.versions + 1] = k.version
      table.sort(g.versions, version_before)
    end
  end
  if not gv.kinds[k.resource] then gv.order[#gv.order + 1] = k.resource end
  gv.kinds[k.resource] = k
  self.stores[k.store] = self.stores[k.store] or {}
  self.store_kind[k.store] = self.store_kind[k.store] or k
end

-- Take a group version's kind away (its CRD went).
function Server:_remove_kind(k)
  local gv = self.gvs[k.gv]
  if not gv or gv.kinds[k.resource] ~= k then return end
  gv.kinds[k.resource] = nil
  gv.order = without(gv.order, k.resource)
  if #gv.order > 0 then return end
  self.gvs[k.gv] = nil
  local g = self.groups[k.group]
  if g then
    g.versions = without(g.versions, k.version)
    if #g.versions == 0 then
      self.groups[k.group] = nil
      self.group_order = without(self.group_order, k.group)
    end
  end
end

local function resource_list(gv)
  local resources = array()
  for _, name in ipairs(gv.order) do
    local k = gv.kinds[name]
    resources[#resources + 1] = { name = k.resource, singularName = k.singular, namespaced = k.namespaced,
      kind = k.kind, verbs = array(copy(VERBS)), shortNames = k.short_names and array(copy(k.short_names)) }
    if k.status then
      resources[#resources + 1] = { name = k.resource .. "/status", singularName = "", namespaced = k.namespaced,
        kind = k.kind, verbs = array { "get", "patch", "update" } }
    end
  end
  return { kind = "APIResourceList", apiVersion = "v1", groupVersion = gv.gv, resources = resources }
end

local function api_group(g)
  local versions = array()
  for _, v in ipairs(g.versions) do versions[#versions + 1] = { groupVersion = g.name .. "/" .. v, version = v } end
  return { kind = "APIGroup", apiVersion = "v1", name = g.name, versions = versions, preferredVersion = versions[1] }
end

function Server:_discovery(segs)
  if segs[1] == "version" and #segs == 1 then
    return { major = "1", minor = "34", gitVersion = "v1.34.0-luaop.apiserver", platform = "linux/amd64" }
  elseif segs[1] == "api" and #segs == 1 then
    return { kind = "APIVersions", versions = array { "v1" } }
  elseif segs[1] == "apis" and #segs == 1 then
    local groups = array()
    for _, name in ipairs(self.group_order) do
      local g = api_group(self.groups[name])
      g.kind, g.apiVersion = nil, nil
      groups[#groups + 1] = g
    end
    return { kind = "APIGroupList", apiVersion = "v1", groups = groups }
  elseif segs[1] == "apis" and #segs == 2 then
    return self.groups[segs[2]] and api_group(self.groups[segs[2]])
  end
  local gv
  if segs[1] == "api" and #segs == 2 then gv = segs[2] end
  if segs[1] == "apis" and #segs == 3 then gv = segs[2] .. "/" .. segs[3] end
  return gv and self.gvs[gv] and resource_list(self.gvs[gv])
end

-- ---- paths ---------------------------------------------------------------------------

local function unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

local function split_path(path)
  local p, q = path:match("^([^?]*)%??(.*)$")
  local segs, query = {}, {}
  for s in p:gmatch("[^/]+") do segs[#segs + 1] = unescape(s) end
  for pair in q:gmatch("[^&]+") do
    local key, value = pair:match("^([^=]*)=?(.*)$")
    key, value = unescape((key:gsub("+", " "))), unescape((value:gsub("+", " ")))
    if query[key] == nil then query[key] = value end
  end
  return segs, query
end

-- A resource path: {k, namespace, name, sub} | {discovery = value} | nil, failure.
function Server:_route(segs)
  local gv, rest
  if segs[1] == "api" and #segs >= 3 then
    gv, rest = segs[2], table.move(segs, 3, #segs, 1, {})
  elseif segs[1] == "apis" and #segs >= 4 then
    gv, rest = segs[2] .. "/" .. segs[3], table.move(segs, 4, #segs, 1, {})
  else
    local d = self:_discovery(segs)
    if d then return { discovery = d } end
    return nil, path_not_found()
  end
  local g = self.gvs[gv]
  if not g then
    local d = self:_discovery(segs)
    if d then return { discovery = d } end
    return nil, path_not_found()
  end
  -- /namespaces/<ns>/<resource>..., but /namespaces/<name>/status is the namespace's own
  local ns
  if rest[1] == "namespaces" and #rest >= 3 and rest[3] ~= "status" and rest[3] ~= "finalize" then
    ns = rest[2]
    rest = table.move(rest, 3, #rest, 1, {})
  end
  local k = g.kinds[rest[1]]
  if not k or #rest > 3 or (ns and not k.namespaced) then return nil, path_not_found() end
  local name, sub = rest[2], rest[3]
  if sub and not (sub == "status" and k.status) then return nil, path_not_found() end
  if name and k.namespaced and not ns then return nil, path_not_found() end
  return { k = k, namespace = ns, name = name, sub = sub }
end

return {
  BUILTIN = BUILTIN, CRD_STORE = CRD_STORE, DEFAULT_NAMESPACES = DEFAULT_NAMESPACES, IMMORTAL = IMMORTAL,
  split_path = split_path, methods = Server,
}
