-- luaop.testing.apiserver.status - errors as metav1.Status, with kube-apiserver's
-- reasons and wording; a part of luaop.testing.apiserver.
local core = require "luaop.core"
local json = core.json
local encode, array = json.encode, json.array
local values_part = require "luaop.testing.apiserver.values"
local nonempty = values_part.nonempty

-- ---- errors: metav1.Status ---------------------------------------------------------

local function failure(code, reason, message, details)
  return { code = code, reason = reason, message = message, details = details }
end

local function status_text(e)
  return encode { kind = "Status", apiVersion = "v1", metadata = {}, status = "Failure", message = e.message,
    reason = e.reason, details = e.details, code = e.code }
end

-- "pods", "ats.cnat.programming-kubernetes.info": how errors name a resource.
local function qresource(k) return k.group == "" and k.resource or k.resource .. "." .. k.group end
local function qkind(k) return k.group == "" and k.kind or k.kind .. "." .. k.group end

local function resource_details(k, name)
  return { name = nonempty(name) and name or nil, group = k.group ~= "" and k.group or nil, kind = k.resource }
end

local MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"

local function not_found(k, name)
  return failure(404, "NotFound", ('%s "%s" not found'):format(qresource(k), name), resource_details(k, name))
end

local function already_exists(k, name)
  return failure(409, "AlreadyExists", ('%s "%s" already exists'):format(qresource(k), name), resource_details(k, name))
end

local function conflict(k, name, why)
  return failure(409, "Conflict", ('Operation cannot be fulfilled on %s "%s": %s'):format(qresource(k), name, why),
    resource_details(k, name))
end

local function forbidden(k, name, why, causes)
  local d = resource_details(k, name)
  d.causes = causes
  local what = nonempty(name) and ('%s "%s"'):format(qresource(k), name) or qresource(k)
  return failure(403, "Forbidden", ("%s is forbidden: %s"):format(what, why), d)
end

local function bad_request(message) return failure(400, "BadRequest", message) end

local function path_not_found()
  return failure(404, "NotFound", "the server could not find the requested resource", {})
end

local function method_not_allowed()
  return failure(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})
end

local function expired(rv, oldest)
  return failure(410, "Expired", ("too old resource version: %s (%s)"):format(rv, oldest))
end

-- A field error as field.Error writes it: {field, reason, message}.
local field_reasons = {
  Invalid = "FieldValueInvalid", Required = "FieldValueRequired", Forbidden = "FieldValueForbidden",
  Unsupported = "FieldValueNotSupported",
}

local function field_error(field, typ, detail, value)
  local body
  if typ == "Invalid" then
    body = ("Invalid value: %s: %s"):format(value, detail)
  elseif typ == "Required" then
    body = "Required value" .. (detail and ": " .. detail or "")
  elseif typ == "Forbidden" then
    body = "Forbidden: " .. detail
  else
    body = ("Unsupported value: %s: supported values: %s"):format(value, detail)
  end
  return { field = field, reason = field_reasons[typ], message = body }
end

local function quote(s) return ('"%s"'):format(s) end

local function invalid(qualified_kind, group, kind, name, errs)
  local parts = {}
  for i, e in ipairs(errs) do parts[i] = e.field .. ": " .. e.message end
  local msg = #parts == 1 and parts[1] or "[" .. table.concat(parts, ", ") .. "]"
  return failure(422, "Invalid", ('%s "%s" is invalid: %s'):format(qualified_kind, name, msg),
    { name = nonempty(name) and name or nil, group = group ~= "" and group or nil, kind = kind, causes = array(errs) })
end

local function invalid_object(k, name, errs) return invalid(qkind(k), k.group, k.kind, name or "", errs) end

local function invalid_options(kind, errs) return invalid(kind .. ".meta.k8s.io", "meta.k8s.io", kind, "", errs) end

local function immutable(field, value)
  return field_error(field, "Invalid", "field is immutable", quote(tostring(value)))
end

return {
  MODIFIED = MODIFIED, already_exists = already_exists, bad_request = bad_request, conflict = conflict,
  expired = expired, failure = failure, field_error = field_error, forbidden = forbidden,
  immutable = immutable, invalid_object = invalid_object, invalid_options = invalid_options,
  method_not_allowed = method_not_allowed, not_found = not_found, path_not_found = path_not_found,
  quote = quote, resource_details = resource_details, status_text = status_text,
}
