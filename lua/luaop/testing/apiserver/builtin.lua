-- luaop.testing.apiserver.builtin - the built-in kinds the in-memory API server
-- serves: every stored resource of luaop.discovery (the targeted Kubernetes
-- version's discovery: scope, short names, verbs, the status subresource),
-- with the behaviours of the API server's strategies overlaid by group and
-- kind; a part of luaop.testing.apiserver. Built once per process.
local core = require "luaop.core"
local array = core.json.array
local discovery = require "luaop.discovery"
local values_part = require "luaop.testing.apiserver.values"
local copy, has, is_object, nonempty = values_part.copy, values_part.has, values_part.is_object, values_part.nonempty

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

-- Behaviours beyond discovery's, by kind ("Kind" in the core group,
-- "group/Kind" in the others; every served version of the kind takes them).
-- The fields are add_kind's (luaop.testing.apiserver.kinds). no_generation:
-- the kinds a Kubernetes 1.37 API server was seen to give no
-- metadata.generation (created and read back); the others have one.
local BEHAVIOURS = {
  Namespace = { status_on_create = { phase = "Active" }, name_rule = "label",
    field_labels = { "status.phase", "metadata.name" }, prepare = prepare_namespace, keep_on_update = keep_namespace,
    return_deleted = true, no_generation = true },
  Secret = { prepare = prepare_secret, field_labels = { "metadata.name", "metadata.namespace", "type" },
    no_generation = true },
  ConfigMap = { no_generation = true },
  Pod = { status_on_create = { phase = "Pending" }, field_labels = POD_FIELDS, return_deleted = true },
  Service = { name_rule = "dns1035", field_labels = { "metadata.name", "metadata.namespace", "spec.clusterIP",
    "spec.type" }, return_deleted = true, no_generation = true },
  ServiceAccount = { return_deleted = true, no_generation = true },
  Event = { field_labels = EVENT_FIELDS, field_paths = { source = "source.component" }, no_generation = true },
  Node = { status_on_create = "keep", field_labels = { "metadata.name", "spec.unschedulable" },
    return_deleted = true, no_generation = true },
  Endpoints = { no_generation = true },
  PersistentVolumeClaim = { no_generation = true },
  PersistentVolume = { no_generation = true },
  LimitRange = { no_generation = true },
  ResourceQuota = { no_generation = true },
  ["coordination.k8s.io/Lease"] = { no_generation = true },
  ["events.k8s.io/Event"] = { no_generation = true },
  ["storage.k8s.io/StorageClass"] = { no_generation = true },
  -- RBAC's names are path segments ("system:aggregate-to-admin")
  ["rbac.authorization.k8s.io/Role"] = { name_rule = "path", no_generation = true },
  ["rbac.authorization.k8s.io/RoleBinding"] = { name_rule = "path", no_generation = true },
  ["rbac.authorization.k8s.io/ClusterRole"] = { name_rule = "path", no_generation = true },
  ["rbac.authorization.k8s.io/ClusterRoleBinding"] = { name_rule = "path", no_generation = true },
}

-- A resource the kit stores: one discovery lists with create, get, list and
-- watch. The others are virtual (reviews answered at once, bindings,
-- component statuses read from health checks): left out.
local STORED_VERBS = { "create", "get", "list", "watch" }
local function stored(r)
  for _, v in ipairs(STORED_VERBS) do
    if not has(r.verbs, v) then return false end
  end
  return true
end

-- add_kind's specs of the built-in kinds: each group's preferred version
-- first (a resource's store is its first version's), then the others;
-- and the resources left out.
local SPECS, LEFT_OUT = {}, {}
for pass = 1, 2 do
  for _, r in ipairs(discovery.resources) do
    if r.preferred == (pass == 1) then
      if stored(r) then
        local spec = {
          group = r.group, version = r.version, kind = r.kind, resource = r.resource, namespaced = r.namespaced,
          status = has(r.subresources, "status"), short_names = #r.short_names > 0 and r.short_names or nil,
          verbs = r.verbs,
        }
        for key, v in pairs(BEHAVIOURS[r.group == "" and r.kind or r.group .. "/" .. r.kind] or {}) do
          spec[key] = v
        end
        SPECS[#SPECS + 1] = spec
      else
        LEFT_OUT[#LEFT_OUT + 1] = r
      end
    end
  end
end

return { SPECS = SPECS, LEFT_OUT = LEFT_OUT, BEHAVIOURS = BEHAVIOURS }
