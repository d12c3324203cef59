-- luaop.testing.apiserver.deletes - delete and deletecollection: preconditions,
-- finalizers, propagation, namespaces; a part of luaop.testing.apiserver.
local core = require "luaop.core"
local json = core.json
local array = json.array
local values_part = require "luaop.testing.apiserver.values"
local copy, is_object, same, timestamp, without =
  values_part.copy, values_part.is_object, values_part.same, values_part.timestamp, values_part.without
local status_part = require "luaop.testing.apiserver.status"
local bad_request, failure, field_error, forbidden, invalid_options, not_found, quote =
  status_part.bad_request, status_part.failure, status_part.field_error, status_part.forbidden,
  status_part.invalid_options, status_part.not_found, status_part.quote
local selectors_part = require "luaop.testing.apiserver.selectors"
local selectors = selectors_part.selectors
local kinds_part = require "luaop.testing.apiserver.kinds"
local IMMORTAL = kinds_part.IMMORTAL
local verbs_part = require "luaop.testing.apiserver.verbs"
local dry_run, list_item = verbs_part.dry_run, verbs_part.list_item

local Server = {} -- methods of the server (luaop.testing.apiserver)

-- Mark a namespace Terminating, delete its content, and let it go once empty.
function Server:_delete_namespace(old, dry)
  local k = self.ns_kind
  if old.metadata.deletionTimestamp then return old end
  local new = copy(old)
  new.metadata.deletionTimestamp = timestamp(self.now())
  new.metadata.deletionGracePeriodSeconds = 0
  new.status = { phase = "Terminating" }
  if dry then return new end
  new.metadata.resourceVersion = self:_next_rv()
  self:_put(k, new, "MODIFIED", old)
  local name = old.metadata.name
  local names = {}
  for store in pairs(self.stores) do names[#names + 1] = store end
  table.sort(names)
  for _, store in ipairs(names) do
    local sk = self.store_kind[store]
    if sk and sk.namespaced then
      for _, obj in ipairs(self:_sorted(sk, name)) do
        local cur = self:_find(sk, name, obj.metadata.name)
        if cur then self:_delete_object(sk, cur, nil) end
      end
    end
  end
  self:_namespace_check(name)
  return new
end

-- Delete old as DELETE with propagation policy does: the object as it was
-- and true when it goes at once; the marked object when finalizers keep it.
function Server:_delete_object(k, old, policy, dry)
  if k == self.ns_kind then return self:_delete_namespace(old, dry) end
  local md = old.metadata
  local fins = array(copy(md.finalizers or {}))
  -- the garbage collector's finalizers, as the policy asks
  if policy then
    fins = without(without(fins, "orphan"), "foregroundDeletion")
    if policy == "Orphan" then fins[#fins + 1] = "orphan" end
    if policy == "Foreground" then fins[#fins + 1] = "foregroundDeletion" end
  end
  if #fins == 0 then
    if not dry then self:_remove(k, old) end
    return old, true
  end
  if md.deletionTimestamp and same(fins, md.finalizers or {}) then return old end
  local new = copy(old)
  new.metadata.finalizers = fins
  if not md.deletionTimestamp then
    new.metadata.deletionTimestamp = timestamp(self.now())
    if (md.generation or 0) > 0 then new.metadata.generation = md.generation + 1 end
  end
  new.metadata.deletionGracePeriodSeconds = 0
  if dry then return new end
  new = self:_write(k, old, new)
  self:_collect(new)
  return new
end

local POLICIES = { Foreground = true, Background = true, Orphan = true }

-- The DeleteOptions of a request | nil, failure.
local function delete_options(r)
  if r.body == nil or r.body == "" then return {} end
  if r.decode_err or not is_object(r.decoded) then
    return nil, bad_request("the object provided is unrecognized (must be of type DeleteOptions)")
  end
  local policy = r.decoded.propagationPolicy
  if policy ~= nil and not POLICIES[policy] then
    return nil, invalid_options("DeleteOptions", { field_error("propagationPolicy", "Unsupported",
      '"Foreground", "Background", "Orphan"', quote(tostring(policy))) })
  end
  return r.decoded
end

-- The precondition check of rest.BeforeDelete (its wording names the kind).
local function precondition_failed(k, name, why)
  local qualified = k.group == "" and k.kind or k.kind .. "." .. k.group
  return failure(409, "Conflict", ('Operation cannot be fulfilled on %s "%s": %s'):format(qualified, name, why),
    { name = name, group = k.group ~= "" and k.group or nil, kind = k.kind })
end

function Server:_delete(r)
  local k = r.k
  local opts, err = delete_options(r)
  if not opts then return nil, err end
  local old = self:_find(k, r.namespace, r.name)
  if not old then return nil, not_found(k, r.name) end
  local pre = is_object(opts.preconditions) and opts.preconditions or {}
  if pre.uid ~= nil and pre.uid ~= old.metadata.uid then
    return nil, precondition_failed(k, r.name, ("the UID in the precondition (%s) does not match the UID in record "
      .. "(%s). The object might have been deleted and then recreated"):format(pre.uid, old.metadata.uid))
  end
  if pre.resourceVersion ~= nil and pre.resourceVersion ~= old.metadata.resourceVersion then
    return nil, precondition_failed(k, r.name, ("the ResourceVersion in the precondition (%s) does not match the "
      .. "ResourceVersion in record (%s). The object might have been modified")
      :format(pre.resourceVersion, old.metadata.resourceVersion))
  end
  if k == self.ns_kind and IMMORTAL[r.name] then
    return nil, forbidden(k, r.name, "this namespace may not be deleted")
  end
  local obj, gone = self:_delete_object(k, old, opts.propagationPolicy, dry_run(r))
  if gone and not k.return_deleted then
    -- most registries answer an object that went at once with a Status (ReturnDeletedObject false)
    return 200, { kind = "Status", apiVersion = "v1", metadata = {}, status = "Success",
      details = { name = r.name, group = k.group ~= "" and k.group or nil, kind = k.resource,
        uid = obj.metadata.uid } }, true
  end
  return 200, obj
end

function Server:_deletecollection(r)
  local k = r.k
  local opts, err = delete_options(r)
  if not opts then return nil, err end
  local match
  match, err = selectors(k, r.query)
  if not match then return nil, err end
  local items = array()
  for _, obj in ipairs(self:_sorted(k, r.namespace)) do
    local cur = self:_find(k, obj.metadata.namespace, obj.metadata.name)
    if cur and match(cur) and not (k == self.ns_kind and IMMORTAL[cur.metadata.name]) then
      items[#items + 1] = list_item(k, self:_delete_object(k, cur, opts.propagationPolicy, dry_run(r)))
    end
  end
  return 200, { apiVersion = k.gv, kind = k.list_kind, metadata = { resourceVersion = tostring(self.rv) },
    items = items }
end

return { methods = Server }
