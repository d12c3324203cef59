-- luaop.testing.apiserver.verbs - the verbs: create, get, list, update, patch and apply,
-- delete, deletecollection; a part of luaop.testing.apiserver.
local core = require "luaop.core"
local json = core.json
local encode, array = json.encode, json.array
local values_part = require "luaop.testing.apiserver.values"
local copy, drop_nulls, has, is_object, nonempty, same, timestamp, view =
  values_part.copy, values_part.drop_nulls, values_part.has, values_part.is_object, values_part.nonempty,
  values_part.same, values_part.timestamp, values_part.view
local status_part = require "luaop.testing.apiserver.status"
local MODIFIED, already_exists, bad_request, conflict, failure, field_error, forbidden, immutable,
  invalid_object, invalid_options, not_found, quote =
  status_part.MODIFIED, status_part.already_exists, status_part.bad_request, status_part.conflict,
  status_part.failure, status_part.field_error, status_part.forbidden, status_part.immutable,
  status_part.invalid_object, status_part.invalid_options, status_part.not_found, status_part.quote
local names_part = require "luaop.testing.apiserver.names"
local meta_errors, name_errors = names_part.meta_errors, names_part.name_errors
local selectors_part = require "luaop.testing.apiserver.selectors"
local selectors = selectors_part.selectors
local patches_part = require "luaop.testing.apiserver.patches"
local PATCH_TYPES, json_patch, merge_into, strategic_into, unsupported_patch =
  patches_part.PATCH_TYPES, patches_part.json_patch, patches_part.merge_into, patches_part.strategic_into,
  patches_part.unsupported_patch
local kinds_part = require "luaop.testing.apiserver.kinds"
local CRD_STORE = kinds_part.CRD_STORE
local store_part = require "luaop.testing.apiserver.store"
local crd_kinds = store_part.crd_kinds
local defaults = require "luaop.testing.apiserver.defaults"
local prune = require "luaop.testing.apiserver.prune"

local Server = {} -- methods of the server (luaop.testing.apiserver)

-- ---- verbs ---------------------------------------------------------------------------------

local function dry_run(r) return r.query.dryRun == "All" end

-- The request's body as an object of kind k (a copy) | nil, failure.
local function body_object(r, k)
  local obj = r.decoded
  if r.decode_err or not is_object(obj) then
    return nil, bad_request(("the object provided is unrecognized (must be of type %s): %s"):format(k.kind,
      r.decode_err or "not a JSON object"))
  end
  obj = copy(obj)
  -- (a body whose text has no null has none to drop)
  if not (r.body and not r.body:find("null", 1, true)) then drop_nulls(obj) end
  if obj.apiVersion ~= nil and obj.apiVersion ~= k.gv then
    return nil, bad_request(("the API version in the data (%s) does not match the expected API version (%s)")
      :format(tostring(obj.apiVersion), k.gv))
  end
  if obj.kind ~= nil and obj.kind ~= k.kind then
    return nil, bad_request(("the object provided is unrecognized (must be of type %s): kind %s in the data")
      :format(k.kind, tostring(obj.kind)))
  end
  obj.apiVersion, obj.kind = k.gv, k.kind
  if obj.metadata == nil then obj.metadata = {} end
  if not is_object(obj.metadata) then
    return nil, bad_request(("the object provided is unrecognized (must be of type %s): metadata is not an object")
      :format(k.kind))
  end
  return obj
end

local NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789" -- k8s.io/apimachinery's utilrand

function Server:_suffix()
  local out = {}
  for i = 1, 5 do
    local n = (self.random() >> 1) % #NAME_CHARS + 1
    out[i] = NAME_CHARS:sub(n, n)
  end
  return table.concat(out)
end

function Server:_uid()
  local a, b = self.random(), self.random()
  return ("%08x-%04x-4%03x-%04x-%012x"):format((a >> 32) & 0xffffffff, (a >> 16) & 0xffff, a & 0xfff,
    ((b >> 48) & 0x3fff) | 0x8000, b & 0xffffffffffff)
end

-- Create obj (a fresh table, changed) of kind k in namespace ns: 201, the
-- stored object | nil, failure. seeding: keeps what the caller gave
-- (status, uid, timestamps) and makes a missing namespace.
function Server:_create_object(k, ns, obj, dry, seeding)
  local md = obj.metadata
  if k.namespaced then
    if nonempty(md.namespace) and md.namespace ~= ns then
      return nil, bad_request("the namespace of the provided object does not match the namespace sent on the request")
    end
    md.namespace = ns
  else
    md.namespace = nil
  end
  if not seeding then
    if nonempty(md.resourceVersion) then
      return nil, failure(500, "InternalError",
        "Internal error occurred: resourceVersion should not be set on objects to be created",
        { causes = array { { message = "resourceVersion should not be set on objects to be created" } } })
    end
    md.uid, md.creationTimestamp, md.deletionTimestamp, md.deletionGracePeriodSeconds = nil, nil, nil, nil
    md.generation, md.managedFields = nil, nil
    if k.status then
      local s = k.status_on_create
      if s ~= "keep" then obj.status = type(s) == "table" and copy(s) or nil end
    end
  elseif obj.status == nil and type(k.status_on_create) == "table" then
    obj.status = copy(k.status_on_create)
  end
  md.resourceVersion, md.managedFields = nil, nil
  -- NamespaceLifecycle admission
  if k.namespaced then
    local nsobj = self:_find(self.ns_kind, nil, ns)
    if not nsobj and seeding then
      self:_create_object(self.ns_kind, nil, { apiVersion = "v1", kind = "Namespace", metadata = { name = ns } },
        false, true)
    elseif not nsobj then
      return nil, not_found(self.ns_kind, ns)
    elseif nsobj.metadata.deletionTimestamp and not seeding then
      local why = ("unable to create new content in namespace %s because it is being terminated"):format(ns)
      return nil, forbidden(k, md.name, why,
        array { { reason = "NamespaceTerminating", message = why, field = "metadata.namespace" } })
    end
  end
  if not nonempty(md.name) then
    if not nonempty(md.generateName) then
      return nil, invalid_object(k, "",
        { field_error("metadata.name", "Required", "name or generateName is required") })
    end
    -- a random suffix, again on a clash (as the API server retries)
    local prefix = md.generateName:sub(1, 58)
    for _ = 1, 8 do
      md.name = prefix .. self:_suffix()
      if not self:_find(k, ns, md.name) then break end
    end
  end
  local errs = name_errors(k.name_rule, md.name)
  for _, e in ipairs(seeding and {} or meta_errors(md)) do errs[#errs + 1] = e end
  if #errs > 0 then return nil, invalid_object(k, md.name, errs) end
  if self:_find(k, ns, md.name) then return nil, already_exists(k, md.name) end
  if k.prepare then k.prepare(obj) end
  prune.object(obj, k.schema) -- (a custom resource's fields its schema does not name)
  if k.store == CRD_STORE then
    local kinds, cerrs = crd_kinds(obj)
    if not kinds then return nil, invalid_object(k, md.name, cerrs) end
    if not dry then self:_serve_crd(obj, kinds) end
  end
  md.uid = nonempty(md.uid) and md.uid or self:_uid()
  -- defaults, canonical quantities, admission (seeding: as stored, no admission)
  local derr = defaults.apply(self, k, obj, seeding and "update" or "create", ns)
  if derr then return nil, derr end
  md.creationTimestamp = md.creationTimestamp or timestamp(self.now())
  if not k.no_generation then md.generation = md.generation or 1 end
  if dry then return 201, obj end
  md.resourceVersion = self:_next_rv()
  self:_put(k, obj, "ADDED")
  return 201, obj
end

function Server:_create(r)
  local obj, err = body_object(r, r.k)
  if not obj then return nil, err end
  return self:_create_object(r.k, r.namespace, obj, dry_run(r))
end

function Server:_get(r)
  local obj = self:_find(r.k, r.namespace, r.name)
  if not obj then return nil, not_found(r.k, r.name) end
  return 200, obj
end

-- Items of a list of built-in kinds carry no apiVersion and kind; custom
-- resources' do.
local function list_item(k, obj)
  local item = view(k, obj)
  if not k.custom then item.apiVersion, item.kind = nil, nil end
  return item
end

-- limit and continue are ignored: every match comes in one page, with no
-- continue token (a client that pages gets it all at once).
function Server:_list(r)
  local k = r.k
  if r.query.watch == "true" or r.query.watch == "1" then
    return nil, bad_request("a watch is served by the server's watch(path), not request()")
  end
  local match, err = selectors(k, r.query)
  if not match then return nil, err end
  local items = array()
  for _, obj in ipairs(self:_sorted(k, r.namespace)) do
    if match(obj) then items[#items + 1] = list_item(k, obj) end
  end
  return 200, { apiVersion = k.gv, kind = k.list_kind, metadata = { resourceVersion = tostring(self.rv) },
    items = items }
end

-- The finalizers a delete adds: the new list.
local function added_finalizers(new, old)
  local out = {}
  for _, f in ipairs(new or {}) do
    if not has(old, f) then out[#out + 1] = quote(f) end
  end
  return out
end

-- Everything but metadata (and status, for kinds with /status) as JSON:
-- what a generation counts.
local function spec_text(k, obj)
  local t = {}
  for key, v in pairs(obj) do
    if key ~= "metadata" and not (k.status and key == "status") then t[key] = v end
  end
  return encode(t)
end

-- The metadata a PUT or PATCH of the object itself may not change, kept
-- as rest.BeforeUpdate keeps it, and checked: nil | failure. Changes new.
function Server:_before_update(k, old, new, dry)
  local omd, md = old.metadata, new.metadata
  if not nonempty(md.uid) then
    md.uid = omd.uid
  elseif md.uid ~= omd.uid then
    return invalid_object(k, omd.name, { immutable("metadata.uid", md.uid) })
  end
  md.creationTimestamp, md.generation, md.managedFields = omd.creationTimestamp, omd.generation, nil
  if omd.deletionTimestamp then
    md.deletionTimestamp = omd.deletionTimestamp
    if md.deletionGracePeriodSeconds == nil then md.deletionGracePeriodSeconds = omd.deletionGracePeriodSeconds end
    local added = added_finalizers(md.finalizers, omd.finalizers)
    if #added > 0 then
      return invalid_object(k, omd.name, { field_error("metadata.finalizers", "Forbidden",
        ("no new finalizers can be added if the object is being deleted, found new finalizers []string{%s}")
          :format(table.concat(added, ", "))) })
    end
  elseif md.deletionTimestamp then
    return invalid_object(k, omd.name, { immutable("metadata.deletionTimestamp", md.deletionTimestamp) })
  end
  local errs = meta_errors(md)
  if #errs > 0 then return invalid_object(k, omd.name, errs) end
  if k.status then new.status = copy(old.status) end
  prune.object(new, k.schema)
  if k.keep_on_update then k.keep_on_update(new, old) end
  local derr = defaults.apply(self, k, new, "update", omd.namespace, old)
  if derr then return derr end
  if k.store == CRD_STORE then
    local kinds, cerrs = crd_kinds(new)
    if not kinds then return invalid_object(k, omd.name, cerrs) end
    if not dry then
      for _, spec in ipairs(kinds) do self:add_kind(spec) end
    end
  end
  if not k.no_generation and spec_text(k, new) ~= spec_text(k, old) then md.generation = (omd.generation or 0) + 1 end
  return nil
end

-- Update old with obj (a fresh table of the caller's) as PUT or PATCH of
-- sub does: 200, the object | nil, failure. The caller has checked the
-- resourceVersion.
function Server:_change(k, old, obj, sub, dry)
  local new = obj
  if sub == "status" then
    -- the status subresource changes status alone
    new = copy(old)
    new.status = obj.status
    prune.object(new, k.schema)
    local derr = defaults.apply(self, k, new, "update", old.metadata.namespace)
    if derr then return nil, derr end
  else
    local err = self:_before_update(k, old, new, dry)
    if err then return nil, err end
  end
  new.apiVersion, new.kind = old.apiVersion, old.kind
  new.metadata.resourceVersion = old.metadata.resourceVersion
  -- an update that changes nothing stores nothing and tells no watch
  if same(new, old) then return 200, old end
  if dry then return 200, new end
  return 200, self:_write(k, old, new)
end

function Server:_update(r)
  local k = r.k
  local obj, err = body_object(r, k)
  if not obj then return nil, err end
  local md = obj.metadata
  if md.name ~= r.name then
    return nil, bad_request(("the name of the object (%s) does not match the name on the URL (%s)")
      :format(tostring(md.name or ""), r.name))
  end
  if k.namespaced then
    if nonempty(md.namespace) and md.namespace ~= r.namespace then
      return nil, bad_request(("the namespace of the object (%s) does not match the namespace on the request (%s)")
        :format(md.namespace, r.namespace))
    end
    md.namespace = r.namespace
  else
    md.namespace = nil
  end
  local old = self:_find(k, r.namespace, r.name)
  if not old then return nil, not_found(k, r.name) end
  if not nonempty(md.resourceVersion) then
    -- custom resources take no unconditional update
    if not k.unconditional then
      return nil, invalid_object(k, r.name,
        { field_error("metadata.resourceVersion", "Invalid", "must be specified for an update", "0x0") })
    end
  elseif md.resourceVersion ~= old.metadata.resourceVersion then
    return nil, conflict(k, r.name, MODIFIED)
  end
  return self:_change(k, old, obj, r.sub, dry_run(r))
end

-- Server-side apply of an object that does not exist: a create.
function Server:_apply_create(r, applied)
  local k = r.k
  if not is_object(applied) then return nil, bad_request("error decoding patch: not a JSON object") end
  if applied.apiVersion == nil or applied.kind == nil then
    return nil, bad_request("invalid object type: apiVersion and kind must be set")
  end
  local obj, err = body_object({ decoded = applied }, k)
  if not obj then return nil, err end
  if obj.metadata.name ~= nil and obj.metadata.name ~= r.name then
    return nil, bad_request(("the name of the object (%s) does not match the name on the URL (%s)")
      :format(tostring(obj.metadata.name), r.name))
  end
  obj.metadata.name = r.name
  return self:_create_object(k, r.namespace, obj, dry_run(r))
end

-- The patched object | nil, failure.
local function patched(kind, cur, patch, k)
  if kind == "json" then return json_patch(cur, patch) end
  if not is_object(patch) then
    return nil, bad_request("Invalid JSON Patch")
  end
  if kind == "strategic" then return strategic_into(cur, patch) end
  if kind == "apply" then
    if patch.apiVersion ~= k.gv or patch.kind ~= k.kind then
      return nil, bad_request(("the API version in the data (%s) does not match the expected API version (%s)")
        :format(tostring(patch.apiVersion), k.gv))
    end
  end
  -- merge; and apply approximated as one: maps merged, lists replaced, null removes
  return merge_into(cur, patch)
end

function Server:_patch(r)
  local k = r.k
  local ctype = (r.ctype or ""):match("^[^;]*"):gsub("%s", "")
  local kind = PATCH_TYPES[ctype]
  if not kind or (kind == "strategic" and not k.strategic) then return nil, unsupported_patch(k) end
  if kind == "apply" and not nonempty(r.query.fieldManager) then
    return nil, invalid_options("PatchOptions",
      { field_error("fieldManager", "Required", "is required for apply patch") })
  end
  if kind ~= "apply" and r.query.force ~= nil then
    return nil, invalid_options("PatchOptions",
      { field_error("force", "Forbidden", "may not be specified for non-apply patch") })
  end
  if r.decode_err then
    -- apply bodies are YAML to the API server; this one reads JSON (which is YAML) only
    return nil, bad_request(kind == "apply" and "error decoding patch: " .. r.decode_err or "invalid JSON patch")
  end
  local old = self:_find(k, r.namespace, r.name)
  if not old then
    if kind == "apply" and not r.sub then return self:_apply_create(r, r.decoded) end
    return nil, not_found(k, r.name)
  end
  local new, err = patched(kind, copy(view(k, old)), r.decoded, k)
  if not new then return nil, err end
  if not is_object(new) or not is_object(new.metadata) then
    return nil, bad_request("the patched object is not an object with metadata")
  end
  drop_nulls(new)
  local md = new.metadata
  if md.name ~= r.name then
    return nil, bad_request(("the name of the object (%s) does not match the name on the URL (%s)")
      :format(tostring(md.name or ""), r.name))
  end
  if k.namespaced and md.namespace ~= r.namespace then
    return nil, bad_request(("the namespace of the object (%s) does not match the namespace on the request (%s)")
      :format(tostring(md.namespace or ""), r.namespace))
  end
  if new.apiVersion ~= k.gv or new.kind ~= k.kind then
    return nil, bad_request(("the API version in the data (%s) does not match the expected API version (%s)")
      :format(tostring(new.apiVersion), k.gv))
  end
  -- a resourceVersion in the patch is a precondition
  if nonempty(md.resourceVersion) and md.resourceVersion ~= old.metadata.resourceVersion then
    return nil, conflict(k, r.name, MODIFIED)
  end
  return self:_change(k, old, new, r.sub, dry_run(r))
end

return { dry_run = dry_run, list_item = list_item, methods = Server }
