-- luaop.client.errors - the client's errors: API errors (a metav1.Status, or a
-- transport failure) as values scripts can test and print, and what the
-- client does with an object it cannot decode; a part of luaop.client.
local core = require "luaop.core"
local events = require "luaop.events"

local json = core.json
local decode = json.decode

local M = {}


-- Errors' metatable holds metamethods only, no __index: what indexing an
-- error misses is nil, never this table (a script holding an error must not
-- reach the one metatable every error of every script shares).
local Error = {}
-- "Reason (code): message", as luaop's core writes an error raised as a
-- value (src/scheduler.c), without the code when no answer came.
local function describe(e)
  local reason, message, code = rawget(e, "reason"), rawget(e, "message"), rawget(e, "code")
  reason = type(reason) == "string" and reason or "Error"
  if math.type(code) == "integer" and code > 0 then reason = ("%s (%d)"):format(reason, code) end
  if type(message) ~= "string" then return reason end
  return reason .. ": " .. message
end
Error.__tostring = describe

local reason_of_code = {
  [400] = "BadRequest", [401] = "Unauthorized", [403] = "Forbidden", [404] = "NotFound",
  [405] = "MethodNotAllowed", [406] = "NotAcceptable", [409] = "Conflict", [410] = "Gone",
  [413] = "RequestEntityTooLarge", [415] = "UnsupportedMediaType", [422] = "Invalid",
  [429] = "TooManyRequests", [500] = "InternalError", [503] = "ServiceUnavailable",
  [504] = "Timeout",
}

-- An error from an HTTP status and body (a metav1.Status when the API server
-- wrote it), or from a transport failure (code 0).

local function api_error(code, body)
  local err = setmetatable({ code = code or 0 }, Error)
  if code == nil or code == 0 then
    err.message = body or "request failed"
    err.reason = err.message:find("timed out", 1, true) and "Timeout" or "TransportError"
    return err
  end
  -- body: the response text, or an already decoded Status
  local status = type(body) == "table" and body or (body and body ~= "" and decode(body))
  if type(status) == "table" and status.kind == "Status" then
    if type(status.reason) == "string" and status.reason ~= "" then err.reason = status.reason end
    if type(status.message) == "string" then err.message = status.message end
    if type(status.details) == "table" then err.details = status.details end
  end
  err.reason = err.reason or reason_of_code[code] or (code >= 500 and "InternalError" or "Unknown")
  err.message = err.message or ("the server answered HTTP %d"):format(code)
  return err
end
M.error = api_error

local function is_error(v)
  return getmetatable(v) == Error
end
M.is_error = is_error

-- The text of any error value, running none of its metamethods (a
-- script's __tostring is its code, and may never return): a string or
-- number as it is, a table as an API error's reason, code and message
-- (luaop.terminal's as "terminal error: message"), anything else by its
-- type.
function M.error_text(v)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then return tostring(v) end
  if t == "table" and rawget(v, "terminal") == true and type(rawget(v, "message")) == "string" then
    return "terminal error: " .. rawget(v, "message")
  end
  if t == "table" and (type(rawget(v, "reason")) == "string" or type(rawget(v, "message")) == "string") then
    return describe(v)
  end
  return ("(error object is a %s value)"):format(t)
end

-- A 2xx answer whose body is not JSON.
-- An object the server sent that does not decode (nested deeper than the
-- decoder goes, a number out of range) is left out, logged by name when
-- that much can be read, and counted (core.counters().undecodable_objects),
-- so one such object never stops the rest of its kind from syncing.
function M.skip_undecodable(gv, kind, text, err, ...)
  local name = json.peek(text, ...) -- the object's metadata, if that decodes
  local fields = { kind = kind, error = err }
  if type(name) == "table" then
    fields.name = type(name.name) == "string" and name.name or nil
    fields.namespace = type(name.namespace) == "string" and name.namespace or nil
  end
  core.count("undecodable_objects")
  core.metrics.series("luaop_decode_errors_total", { gv .. "/" .. kind }):add()
  -- a Warning Event on it, when its name could be read
  if fields.name then
    events.record {
      regarding = { apiVersion = gv, kind = kind, metadata = { name = fields.name, namespace = fields.namespace } },
      type = "Warning", reason = "UndecodableObject", action = "Decode", controller = "informer",
      note = "left out of the cache: " .. tostring(err),
    }
  end
  core.log.write("error", "client", "skipping an object that cannot be decoded", fields)
end

function M.malformed(status, err)
  return setmetatable({ code = status, reason = "InternalError",
    message = "the server sent malformed JSON: " .. err }, Error)
end

-- An error of the client's own making: fields code, reason, message.
function M.of(fields)
  return setmetatable(fields, Error)
end

-- ---- answers of a shape the API server never sends ------------------------------
-- (a broken proxy, a fake server: such an answer is an error for the
-- request, never a value luaop goes on with; an informer lists again)

-- A 2xx answer luaop cannot use: code, reason (MalformedList,
-- MalformedDiscovery), what was wrong.
function M.unusable(status, reason, why)
  return setmetatable({ code = status or 200, reason = reason, message = "the server sent " .. why }, Error)
end

local function is_object(v) return type(v) == "table" and not json.is_array(v) end
local function is_list(v) return type(v) == "table" and (json.is_array(v) or next(v) == nil) end

-- What is wrong with an object's metadata as a list or a watch sends it
-- (a name, a namespace that is the one asked for when one was), said of
-- the object ("has no name"), or nil. ns: the namespace asked for (nil:
-- all, or a cluster-scoped kind).
function M.bad_metadata(md, ns, bookmark)
  if not is_object(md) then return "has no metadata" end
  local name, namespace, rv = rawget(md, "name"), rawget(md, "namespace"), rawget(md, "resourceVersion")
  if not bookmark and (type(name) ~= "string" or name == "") then return "has no name" end
  if namespace ~= nil and type(namespace) ~= "string" then return "has a namespace that is not a string" end
  if ns and not bookmark and namespace ~= ns then
    return ("is in namespace %q, not the %q asked for"):format(tostring(namespace), ns)
  end
  if rv ~= nil and type(rv) ~= "string" then return "has a resourceVersion that is not a string" end
  return nil
end

-- What is wrong with a LIST's page (a ...List: metadata, items of objects
-- each with a name), or nil. last: the last page, which must say the
-- list's resourceVersion.
function M.bad_page(page, ns, last)
  if not is_object(page) then return "a list that is not an object" end
  local md = rawget(page, "metadata")
  if not is_object(md) then return "a list with no metadata" end
  local items = rawget(page, "items")
  if not is_list(items) then return "a list whose items are " .. (items == nil and "missing" or "not a list") end
  for _, item in ipairs(items) do
    local why = not is_object(item) and "is not an object" or M.bad_metadata(rawget(item, "metadata"), ns)
    if why then return "a list with an item that " .. why end
  end
  if last and (type(rawget(md, "resourceVersion")) ~= "string" or md.resourceVersion == "") then
    return "a list with no resourceVersion"
  end
  return nil
end

-- What is wrong with a group version's discovery (an APIResourceList:
-- resources, each with a name, a kind and its scope), or nil.
function M.bad_resources(list)
  local resources = is_object(list) and rawget(list, "resources")
  if not is_list(resources) then return "a resource list with no resources" end
  for _, r in ipairs(resources) do
    if not is_object(r) or type(r.name) ~= "string" or r.name == "" or type(r.kind) ~= "string"
      or type(r.namespaced) ~= "boolean" then
      return "a resource list with a resource that has no name, kind or scope"
    end
  end
  return nil
end

-- ---- misuse: kinds as a script writes them ------------------------------------

-- A value as a message about misuse shows it: the string "30s", the
-- number -5, nil, a table (luaop.definition.shown too).
function M.shown(v)
  if type(v) == "string" then return ("the string %q"):format(v) end
  if type(v) == "number" or type(v) == "boolean" then return ("the %s %s"):format(type(v), tostring(v)) end
  if v == nil then return "nil" end
  return "a " .. type(v)
end

-- What is wrong with the string spec as a kind ("Kind", "version/Kind",
-- "group/version/Kind", each part as Kubernetes allows it: a kind's name,
-- a DNS label for the version, a DNS subdomain for the group), or nil.
-- (The kinds found well-formed are kept, up to 1000 of them: the check of
-- every client call then allocates nothing.)
local well_formed, n_well_formed = {}, 0

local function kind_problem(spec)
  if well_formed[spec] then return nil end
  if spec == "" then return "empty" end
  local parts = {}
  for p in (spec .. "/"):gmatch("([^/]*)/") do parts[#parts + 1] = p end
  if #parts > 3 then return ("%d parts"):format(#parts) end
  for _, p in ipairs(parts) do
    if p == "" then return "an empty part" end
  end
  local kind, version, group = parts[#parts], parts[#parts - 1], parts[#parts - 2]
  if not kind:match("^%a[%w%-]*$") or kind:match("%-$") or #kind > 63 then
    return ("%q is not a kind's name"):format(kind)
  end
  if version and (not version:match("^%l[%l%d%-]*$") or version:match("%-$") or #version > 63) then
    return ("%q is not a version such as v1 or v1beta1"):format(version)
  end
  for label in ((group or "") .. "."):gmatch("([^.]*)%.") do
    if group and (#label > 63 or not label:match("^[%l%d][%l%d%-]*$") or label:match("%-$")) then
      return ("%q is not an API group (a DNS subdomain)"):format(group)
    end
  end
  if n_well_formed >= 1000 then well_formed, n_well_formed = {}, 0 end
  well_formed[spec], n_well_formed = true, n_well_formed + 1
  return nil
end

M.KIND_FORMS = 'Kind, version/Kind or group/version/Kind (such as "ConfigMap", "v1/ConfigMap" or '
  .. '"apps/v1/Deployment")'

-- What is wrong with spec as a kind, as "kind must be ..., got ...", or nil
-- (a call's misuse, to follow its form).
function M.bad_kind(spec)
  if type(spec) ~= "string" then
    return ('kind must be a string such as "v1/ConfigMap", got %s'):format(M.shown(spec))
  end
  local why = kind_problem(spec)
  if why then return ("kind must be %s, got %s (%s)"):format(M.KIND_FORMS, M.shown(spec), why) end
end

-- What is wrong with an object's apiVersion and kind as the kind they make,
-- or nil.
function M.bad_object_kind(obj)
  if type(obj.apiVersion) ~= "string" then
    return ('obj.apiVersion must be a string such as "v1" or "apps/v1", got %s'):format(M.shown(obj.apiVersion))
  end
  if type(obj.kind) ~= "string" then
    return ('obj.kind must be a string such as "ConfigMap", got %s'):format(M.shown(obj.kind))
  end
  local why = kind_problem(obj.apiVersion .. "/" .. obj.kind)
  if why or obj.apiVersion == "" then
    return ('obj.apiVersion and obj.kind must make version/Kind or group/version/Kind (such as apiVersion = '
      .. '"apps/v1", kind = "Deployment"), got apiVersion %q and kind %q (%s)'):format(obj.apiVersion, obj.kind,
      why or "an empty part")
  end
end

return M
