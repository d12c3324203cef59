-- luaop.object - helpers on decoded objects: a deep copy, and owner
-- references as controller-runtime's controllerutil sets them. Re-exported
-- by luaop (luaop.copy, luaop.controller_of, luaop.set_controller).
local core = require "luaop.core"

local M = {}

-- A deep copy of a decoded object (JSON arrays stay arrays; no other
-- metatable is copied: a script's, with a __gc added after it was set,
-- would get a finalizer the sandbox refuses).
local is_array, make_array = core.json.is_array, core.json.array
local function copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy(x) end
  if is_array(v) then make_array(out) end
  return out
end
M.copy = copy

-- The controller reference of obj (its ownerReferences entry with
-- controller = true), or nil.
function M.controller_of(obj)
  local md = type(obj) == "table" and obj.metadata
  for _, ref in ipairs(md and md.ownerReferences or {}) do
    if ref.controller then return ref end
  end
  return nil
end

-- Make owner the controller of obj, as controller-runtime's
-- SetControllerReference does: an ownerReference with controller and
-- blockOwnerDeletion set, so the owner's controller is told of obj's
-- events (owns = {...}) and deleting the owner deletes obj. Raises when
-- obj has another controller already, or when a namespaced owner is in
-- another namespace. Returns obj.
function M.set_controller(obj, owner)
  if type(obj) ~= "table" or type(owner) ~= "table" or type(owner.metadata) ~= "table" then
    error("set_controller(obj, owner) needs two objects", 2)
  end
  local om = owner.metadata
  if type(owner.apiVersion) ~= "string" or type(owner.kind) ~= "string" or type(om.name) ~= "string"
    or type(om.uid) ~= "string" then
    error("the owner needs apiVersion, kind, metadata.name and metadata.uid (an object read from the API server)", 2)
  end
  obj.metadata = obj.metadata or {}
  local md = obj.metadata
  if om.namespace and om.namespace ~= "" and md.namespace ~= om.namespace then
    -- as controller-runtime: an owner's dependents are in its namespace
    error(("an owner in namespace %s can only own objects in it (this one's metadata.namespace is %s)"):format(
      om.namespace, md.namespace == nil and "not set" or tostring(md.namespace)), 2)
  end
  local ref = { apiVersion = owner.apiVersion, kind = owner.kind, name = om.name, uid = om.uid,
    controller = true, blockOwnerDeletion = true }
  local refs = md.ownerReferences or core.json.array()
  for i, r in ipairs(refs) do
    if r.uid == om.uid then
      refs[i] = ref
      md.ownerReferences = refs
      return obj
    end
    if r.controller then
      local what = tostring(md.name or md.generateName)
      error(("%s %s is controlled by %s %s already"):format(obj.kind or "the object", what,
        r.kind, r.name), 2)
    end
  end
  refs[#refs + 1] = ref
  md.ownerReferences = refs
  return obj
end

-- Whether two flat maps (labels, annotations, a series' labels) hold the
-- same keys and values; nil (or a non-table) is the empty map.
function M.same_map(a, b)
  a, b = type(a) == "table" and a or {}, type(b) == "table" and b or {}
  for k, v in pairs(a) do
    if b[k] ~= v then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

return M
