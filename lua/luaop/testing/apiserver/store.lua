-- luaop.testing.apiserver.store - the store (objects, resourceVersions, events) and the
-- synchronous stand-ins for the garbage collector and the namespace and CRD
-- finalizers; a part of luaop.testing.apiserver.
local core = require "luaop.core"
local json = core.json
local array, is_array = json.array, json.is_array
local values_part = require "luaop.testing.apiserver.values"
local copy, has, is_object, nonempty, timestamp, without =
  values_part.copy, values_part.has, values_part.is_object, values_part.nonempty, values_part.timestamp,
  values_part.without
local status_part = require "luaop.testing.apiserver.status"
local field_error, quote = status_part.field_error, status_part.quote
local kinds_part = require "luaop.testing.apiserver.kinds"
local CRD_STORE = kinds_part.CRD_STORE

local Server = {} -- methods of the server (luaop.testing.apiserver)

-- ---- the store ------------------------------------------------------------------------

local function okey(k, ns, name) return k.namespaced and ns .. "/" .. name or name end

function Server:_find(k, ns, name)
  return self.stores[k.store][okey(k, ns, name)]
end

function Server:_next_rv()
  self.rv = self.rv + 1
  return tostring(self.rv)
end

-- The objects of kind k (in namespace ns, or all), in the API server's order (by key).
function Server:_sorted(k, ns)
  local keys, st = {}, self.stores[k.store] or {}
  for key, obj in pairs(st) do
    if not ns or obj.metadata.namespace == ns then keys[#keys + 1] = key end
  end
  table.sort(keys)
  for i, key in ipairs(keys) do keys[i] = st[key] end
  return keys
end

-- Record a change for watches and wake the waiting ones.
function Server:_event(k, typ, obj, old)
  self.events[#self.events + 1] = { rv = self.rv, store = k.store, type = typ, object = obj, old = old }
  for w in pairs(self.watches) do
    if w.waiting then w.cond:signal() end
  end
end

-- Stored objects are never changed in place: each change stores a new table.
function Server:_put(k, obj, typ, old)
  local md = obj.metadata
  local key = okey(k, md.namespace, md.name)
  self.stores[k.store][key] = obj
  self.uids[md.uid] = { k = k, key = key }
  self:_event(k, typ, obj, old)
end

-- The object with this uid, and its kind | nil.
function Server:_by_uid(uid)
  local at = uid and self.uids[uid]
  if not at then return nil end
  return self.stores[at.k.store][at.key], at.k
end

-- Whether an object being deleted may go: no finalizers left (a
-- namespace's own spec.finalizers too).
local function may_go(k, obj)
  if not obj.metadata.deletionTimestamp or #(obj.metadata.finalizers or {}) > 0 then return false end
  return k.store ~= "/namespaces" or #(obj.spec and obj.spec.finalizers or {}) == 0
end

-- The object goes: DELETED with a new resourceVersion, then what follows
-- from it (garbage collection, a terminating namespace, a CRD's kinds).
function Server:_remove(k, obj)
  local old = self:_find(k, obj.metadata.namespace, obj.metadata.name)
  local final = copy(obj)
  final.metadata.resourceVersion = self:_next_rv()
  self.stores[k.store][okey(k, final.metadata.namespace, final.metadata.name)] = nil
  self.uids[final.metadata.uid] = nil
  self:_event(k, "DELETED", final, old)
  self:_after_removal(k, final)
  return final
end

-- Store new in place of old: MODIFIED, or the object goes when it was
-- being deleted and its last finalizer is gone. Returns what is stored.
function Server:_write(k, old, new)
  if may_go(k, new) then return self:_remove(k, new) end
  new.metadata.resourceVersion = self:_next_rv()
  self:_put(k, new, "MODIFIED", old)
  return new
end

-- ---- garbage collection, namespaces, CRDs (synchronous stand-ins for controllers) ----------

-- Objects whose ownerReferences name uid: {k, obj}, in a stable order.
function Server:_dependents(uid, blocking_only)
  local out = {}
  local stores = {}
  for name in pairs(self.stores) do stores[#stores + 1] = name end
  table.sort(stores)
  for _, name in ipairs(stores) do
    local k = self.store_kind[name]
    for _, obj in ipairs(self:_sorted(k)) do
      for _, ref in ipairs(obj.metadata.ownerReferences or {}) do
        if ref.uid == uid and (not blocking_only or ref.blockOwnerDeletion == true) then
          out[#out + 1] = { k = k, uid = obj.metadata.uid }
          break
        end
      end
    end
  end
  return out
end

local function drop_owner(obj, uid)
  local new = copy(obj)
  local refs = array()
  for _, ref in ipairs(new.metadata.ownerReferences or {}) do
    if ref.uid ~= uid then refs[#refs + 1] = ref end
  end
  new.metadata.ownerReferences = #refs > 0 and refs or nil
  return new
end

-- Remove finalizer f from the object with this uid, if it still has it.
function Server:_drop_finalizer(uid, f)
  local obj, k = self:_by_uid(uid)
  if not obj or not has(obj.metadata.finalizers, f) then return end
  local new = copy(obj)
  local fins = without(new.metadata.finalizers, f)
  new.metadata.finalizers = #fins > 0 and fins or nil
  self:_write(k, obj, new)
end

-- The collector's work on an object marked for deletion with its
-- finalizers: orphan dependents, or delete them first (foreground).
function Server:_collect(obj)
  local uid, fins = obj.metadata.uid, obj.metadata.finalizers or {}
  if has(fins, "orphan") then
    for _, d in ipairs(self:_dependents(uid)) do
      local cur = self:_by_uid(d.uid)
      if cur then self:_write(d.k, cur, drop_owner(cur, uid)) end
    end
    self:_drop_finalizer(uid, "orphan")
  end
  if has(fins, "foregroundDeletion") then
    for _, d in ipairs(self:_dependents(uid)) do
      local cur = self:_by_uid(d.uid)
      if cur then self:_delete_object(d.k, cur, "Foreground") end
    end
    if #self:_dependents(uid, true) == 0 then self:_drop_finalizer(uid, "foregroundDeletion") end
  end
end

function Server:_namespace_empty(ns)
  for name, st in pairs(self.stores) do
    if self.store_kind[name].namespaced then
      for _, obj in pairs(st) do
        if obj.metadata.namespace == ns then return false end
      end
    end
  end
  return true
end

-- A terminating namespace whose content is gone goes too (the namespace
-- controller's finalizer), unless other finalizers keep it.
function Server:_namespace_check(ns)
  local k = self.ns_kind
  local obj = self:_find(k, nil, ns)
  if not obj or not obj.metadata.deletionTimestamp or not self:_namespace_empty(ns) then return end
  local new = copy(obj)
  new.spec = new.spec or {}
  new.spec.finalizers = array()
  self:_write(k, obj, new)
end

function Server:_after_removal(k, obj)
  local uid = obj.metadata.uid
  -- dependents: deleted when no other owner is left, else the reference goes
  for _, d in ipairs(self:_dependents(uid)) do
    local cur = self:_by_uid(d.uid)
    if cur then
      local other = false
      for _, ref in ipairs(cur.metadata.ownerReferences or {}) do
        if ref.uid ~= uid and self.uids[ref.uid] then other = true end
      end
      if other then
        self:_write(d.k, cur, drop_owner(cur, uid))
      else
        self:_delete_object(d.k, cur, nil)
      end
    end
  end
  -- owners deleting in the foreground go once their blocking dependents have
  for _, ref in ipairs(obj.metadata.ownerReferences or {}) do
    local owner = self:_by_uid(ref.uid)
    if owner and owner.metadata.deletionTimestamp and has(owner.metadata.finalizers, "foregroundDeletion")
        and #self:_dependents(ref.uid, true) == 0 then
      self:_drop_finalizer(ref.uid, "foregroundDeletion")
    end
  end
  if k.namespaced then self:_namespace_check(obj.metadata.namespace) end
  if k.store == CRD_STORE then self:_drop_crd(obj) end
end

-- The kinds a CRD serves: a list of add_kind specs | nil, field errors.
local function crd_kinds(crd)
  local spec, md = crd.spec, crd.metadata
  local errs = {}
  if not is_object(spec) then
    return nil, { field_error("spec", "Required") }
  end
  local names = is_object(spec.names) and spec.names or {}
  if not nonempty(spec.group) then errs[#errs + 1] = field_error("spec.group", "Required") end
  if not nonempty(names.plural) then errs[#errs + 1] = field_error("spec.names.plural", "Required") end
  if not nonempty(names.kind) then errs[#errs + 1] = field_error("spec.names.kind", "Required") end
  if spec.scope ~= "Namespaced" and spec.scope ~= "Cluster" then
    errs[#errs + 1] = field_error("spec.scope", "Unsupported", '"Cluster", "Namespaced"', quote(tostring(spec.scope)))
  end
  if not is_array(spec.versions) or #spec.versions == 0 then
    errs[#errs + 1] = field_error("spec.versions", "Invalid", "must have exactly one version marked as storage version",
      "null")
  end
  if #errs == 0 and md.name ~= names.plural .. "." .. spec.group then
    errs[#errs + 1] = field_error("metadata.name", "Invalid", 'must be spec.names.plural+"."+spec.group',
      quote(md.name))
  end
  if #errs > 0 then return nil, errs end
  local kinds = {}
  for _, v in ipairs(spec.versions) do
    if v.served ~= false and nonempty(v.name) then
      local fields = { "metadata.name" }
      if spec.scope == "Namespaced" then fields[2] = "metadata.namespace" end
      for _, f in ipairs(is_array(v.selectableFields) and v.selectableFields or {}) do
        if nonempty(f.jsonPath) then fields[#fields + 1] = (f.jsonPath:gsub("^%.", "")) end
      end
      kinds[#kinds + 1] = {
        group = spec.group, version = v.name, kind = names.kind, resource = names.plural,
        namespaced = spec.scope == "Namespaced", status = is_object(v.subresources) and v.subresources.status ~= nil,
        list_kind = names.listKind, singular = names.singular, short_names = names.shortNames, custom = true,
        field_labels = fields, crd = md.name, schema = is_object(v.schema) and v.schema.openAPIV3Schema or nil,
      }
    end
  end
  return kinds
end

-- Serve a CRD's kinds; its status says so, as the apiextensions controllers write it.
function Server:_serve_crd(crd, kinds)
  for _, spec in ipairs(kinds) do self:add_kind(spec) end
  local now = timestamp(self.now())
  local stored = array()
  for _, v in ipairs(crd.spec.versions) do
    if v.storage then stored[#stored + 1] = v.name end
  end
  crd.status = {
    acceptedNames = copy(crd.spec.names),
    conditions = array {
      { type = "NamesAccepted", status = "True", reason = "NoConflicts", message = "no conflicts found",
        lastTransitionTime = now },
      { type = "Established", status = "True", reason = "InitialNamesAccepted",
        message = "the initial names have been accepted", lastTransitionTime = now },
    },
    storedVersions = stored,
  }
end

-- A CRD that goes takes its custom resources with it (the real one waits
-- for its cleanup finalizer), and its watches end.
function Server:_drop_crd(crd)
  local gone = {}
  for _, gv in pairs(self.gvs) do
    for _, k in pairs(gv.kinds) do
      if k.crd == crd.metadata.name then gone[#gone + 1] = k end
    end
  end
  if #gone == 0 then return end
  local k = gone[1]
  for _, obj in ipairs(self:_sorted(k)) do
    local cur = self:_find(k, obj.metadata.namespace, obj.metadata.name)
    if cur then self:_remove(k, cur) end
  end
  for w in pairs(self.watches) do
    if w.k.store == k.store then w:_end(nil, true) end
  end
  for _, kk in ipairs(gone) do self:_remove_kind(kk) end
  self.store_kind[k.store] = nil
  self.stores[k.store] = nil
end

return { crd_kinds = crd_kinds, okey = okey, methods = Server }
