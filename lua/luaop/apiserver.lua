-- luaop.apiserver - an in-memory Kubernetes API server for the test kit
-- (luaop.testing): kube-apiserver's paths, verbs, errors and watch
-- semantics, served from Lua tables, with no network.
--
--   local s = apiserver.new { now = function() return seconds end, seed = 1 }
--   s:add_kind { group = "", version = "v1", kind = "Pod", resource = "pods", namespaced = true, status = true }
--   s:add_crd(crd)                             -- each served version, /status when it has one
--   local status, text = s:request("POST", "/api/v1/namespaces/default/configmaps", body, content_type)
--   local w = s:watch("/api/v1/pods?watch=true&resourceVersion=12")  -- w:next() waits (yields the task)
--   s:actions(), s:fail{...}, s:objects(kind), s:get(kind, ns, name), s:seed(obj)
--   s:expire_watches(), s:end_watches(), s:last_action(), s:clear_actions(),
--   s:clear_failures(), s:resource_version(), s:hold_watches(match), s:release_watches()
--
-- Requests never yield: a request is served whole when it is made (a
-- transport in front may yield, as luaop.testing's does). Watches wait on
-- a core.task.cond each, so w:next() must run in a task.
--
-- What it serves as the API server does: discovery (/api, /api/v1, /apis,
-- /apis/<g>[/<v>]); create (generateName, uid, one increasing
-- resourceVersion, creationTimestamp, generation; NamespaceLifecycle's 404
-- and 403), get, list and watch (label and field selectors as the API
-- server parses them; a watch resumes exactly from any resourceVersion
-- handed out, and objects that stop or start matching a selector arrive as
-- DELETED or ADDED), update (optimistic concurrency, /status, generation,
-- no-op updates that change nothing), patch (merge, JSON, strategic,
-- apply), delete (preconditions, finalizers, propagation), dry runs, and
-- errors as metav1.Status with the API server's reasons and wording.
--
-- What it approximates (each said again where it is done):
--   - list ignores limit and continue: every match in one page, no token;
--   - a watch ignores timeoutSeconds and allowWatchBookmarks: it ends only
--     when closed, by s:end_watches() (a clean end, as the server's timeout)
--     or by s:expire_watches() (410 Expired);
--   - strategic merge patch knows the merge keys of common lists
--     (containers, env, volumes, ports, conditions, ownerReferences,
--     finalizers ...), not every schema's; elsewhere it is a merge patch;
--   - server-side apply merges the applied fields into the object (maps
--     merged, lists replaced, null removes): no field ownership, no
--     conflicts, fields a manager stops applying stay;
--   - the garbage collector and the namespace and CRD finalizers run
--     synchronously inside the request that lets an object go (the real
--     ones are controllers that act a moment later);
--   - Pods are deleted at once (no kubelet: no graceful deletion);
--   - no schema validation, defaulting or pruning beyond names,
--     metadata and a few defaults (Secret type, Namespace phase);
--   - core v1 Events and events.k8s.io/v1 Events are stored apart;
--   - a dependent whose owner never existed is not collected (the real
--     collector deletes it once it has looked the owner up);
--   - the whole event history is kept (no compaction until
--     expire_watches), so memory grows with every change.
local core = require "luaop.core"

local json = core.json
local encode, decode, null, array, is_array = json.encode, json.decode, json.null, json.array, json.is_array

local M = {}

local Server = {}
Server.__index = Server

local Watch = {}
Watch.__index = Watch

-- ---- values ----------------------------------------------------------------------

-- A deep copy (JSON arrays stay arrays).
local copy = require("luaop.object").copy

local function is_object(v) return type(v) == "table" and not is_array(v) end

-- Equal as JSON (keys are written sorted, so equal values write equal text).
local function same(a, b) return encode(a) == encode(b) end

-- Null members of objects go (a typed decoder, or a CR's pruning, would not
-- keep them); arrays keep theirs. Mutates v.
local function drop_nulls(v)
  if type(v) ~= "table" then return v end
  if is_array(v) then
    for _, x in ipairs(v) do drop_nulls(x) end
    return v
  end
  for k, x in pairs(v) do
    if x == null then v[k] = nil else drop_nulls(x) end
  end
  return v
end

-- A table through JSON: arrays marked, however the caller built it.
local function canonical(v)
  local ok, text = pcall(encode, v)
  if not ok then error("not an object JSON can hold: " .. tostring(text), 3) end
  return decode(text)
end

local function has(list, x)
  for _, y in ipairs(list or {}) do
    if y == x then return true end
  end
  return false
end

local function without(list, x)
  local out = array()
  for _, y in ipairs(list or {}) do
    if y ~= x then out[#out + 1] = y end
  end
  return out
end

local function nonempty(s) return type(s) == "string" and s ~= "" end

-- The API server's timestamps: RFC 3339, UTC, seconds.
local function timestamp(t) return os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(t)) end

-- The object as one version serves it: apiVersion and kind set, the rest
-- shared (it is encoded or copied, never changed).
local function view(k, obj)
  local out = {}
  for key, v in pairs(obj) do out[key] = v end
  out.apiVersion, out.kind = k.gv, k.kind
  return out
end

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

-- ---- names -------------------------------------------------------------------------

local SUBDOMAIN = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
  .. "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
  .. "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
local LABEL = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
  .. "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
  .. "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
local DNS1035 = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
  .. "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used "
  .. "for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"

local function is_label(s) return s:match("^[a-z0-9][-a-z0-9]*$") ~= nil and s:sub(-1) ~= "-" end

local function is_subdomain(s)
  for label in (s .. "."):gmatch("(.-)%.") do
    if not is_label(label) then return false end
  end
  return true
end

-- The field errors of a name under rule "subdomain" (most kinds), "label"
-- (Namespace) or "dns1035" (Service).
local function name_errors(rule, name)
  local errs, max = {}, rule == "subdomain" and 253 or 63
  if #name > max then
    errs[1] = field_error("metadata.name", "Invalid", ("must be no more than %d characters"):format(max), quote(name))
  end
  local ok, msg
  if rule == "label" then
    ok, msg = is_label(name), LABEL
  elseif rule == "dns1035" then
    ok, msg = name:match("^[a-z][-a-z0-9]*$") ~= nil and name:sub(-1) ~= "-", DNS1035
  else
    ok, msg = is_subdomain(name), SUBDOMAIN
  end
  if not ok then errs[#errs + 1] = field_error("metadata.name", "Invalid", msg, quote(name)) end
  return errs
end

-- Labels, annotations, finalizers and ownerReferences as ValidateObjectMeta
-- checks them: a list of field errors.
local LABEL_VALUE = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
  .. "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
  .. "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
local NAME_PART = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
  .. "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
  .. "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
local MAX_ANNOTATIONS = 256 * 1024

local function is_name_part(s) return s:match("^%w[%w_%.%-]*$") ~= nil and s:match("%w$") ~= nil end

-- What is wrong with a qualified name ("prefix/name" or "name"): messages.
local function qualified_name_problems(key)
  local parts = {}
  for p in (key .. "/"):gmatch("(.-)/") do parts[#parts + 1] = p end
  if #parts > 2 then
    return { "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
      .. "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
      .. "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. "
      .. "'example.com/MyName')" }
  end
  local out, name = {}, parts[#parts]
  if #parts == 2 then
    if parts[1] == "" then
      out[#out + 1] = "prefix part must be non-empty"
    elseif #parts[1] > 253 or not is_subdomain(parts[1]) then
      out[#out + 1] = "prefix part " .. SUBDOMAIN
    end
  end
  if name == "" then
    out[#out + 1] = "name part must be non-empty"
  elseif #name > 63 then
    out[#out + 1] = "name part must be no more than 63 characters"
  elseif not is_name_part(name) then
    out[#out + 1] = NAME_PART
  end
  return out
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(is_object(t) and t or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

local function owner_errors(refs, errs)
  local controllers = {}
  for _, ref in ipairs(is_array(refs) and refs or {}) do
    for _, f in ipairs { { "apiVersion", "version" }, { "kind", "kind" }, { "name", "name" }, { "uid", "uid" } } do
      if not nonempty(ref[f[1]]) then
        errs[#errs + 1] = field_error("metadata.ownerReferences." .. f[1], "Invalid", f[2] .. " must not be empty",
          '""')
      end
    end
    if ref.controller == true then controllers[#controllers + 1] = ("%s/%s"):format(ref.kind, ref.name) end
  end
  if #controllers > 1 then
    errs[#errs + 1] = field_error("metadata.ownerReferences", "Invalid",
      ('Only one reference can have Controller set to true. Found "true" in references for %s')
        :format(table.concat(controllers, " and ")), encode(refs))
  end
end

local function meta_errors(md)
  local errs = {}
  local labels = md.labels
  for _, key in ipairs(sorted_keys(labels)) do
    for _, p in ipairs(qualified_name_problems(key)) do
      errs[#errs + 1] = field_error("metadata.labels", "Invalid", p, quote(key))
    end
    local v = labels[key]
    if type(v) ~= "string" or #v > 63 or not (v == "" or is_name_part(v)) then
      local why = type(v) == "string" and #v > 63 and "must be no more than 63 characters" or LABEL_VALUE
      errs[#errs + 1] = field_error("metadata.labels", "Invalid", why, quote(tostring(v)))
    end
  end
  local size = 0
  for _, key in ipairs(sorted_keys(md.annotations)) do
    for _, p in ipairs(qualified_name_problems(key)) do
      errs[#errs + 1] = field_error("metadata.annotations", "Invalid", p, quote(key))
    end
    size = size + #key + #tostring(md.annotations[key])
  end
  if size > MAX_ANNOTATIONS then
    errs[#errs + 1] = { field = "metadata.annotations", reason = "FieldValueTooLong",
      message = ("Too long: must have at most %d bytes"):format(MAX_ANNOTATIONS) }
  end
  for _, f in ipairs(is_array(md.finalizers) and md.finalizers or {}) do
    for _, p in ipairs(qualified_name_problems(tostring(f))) do
      errs[#errs + 1] = field_error("metadata.finalizers", "Invalid", p, quote(tostring(f)))
    end
  end
  owner_errors(md.ownerReferences, errs)
  return errs
end

-- ---- selectors -----------------------------------------------------------------------

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- Requirements split on the commas outside parentheses.
local function split_requirements(s)
  local parts, depth, start = {}, 0, 1
  for i = 1, #s do
    local c = s:sub(i, i)
    if c == "(" then
      depth = depth + 1
    elseif c == ")" then
      depth = depth - 1
    elseif c == "," and depth == 0 then
      parts[#parts + 1] = s:sub(start, i - 1)
      start = i + 1
    end
  end
  parts[#parts + 1] = s:sub(start)
  return parts
end

local KEY, VALUE = "([%w%._/%-]+)", "([%w%._%-]*)"

-- One requirement: a function of the labels, or nil.
local function label_requirement(part)
  local key = part:match("^!%s*" .. KEY .. "$")
  if key then return function(l) return l[key] == nil end end
  local op, set
  key, op, set = part:match("^" .. KEY .. "%s+(n?o?t?in)%s*(%b())$")
  if key and (op == "in" or op == "notin") then
    local values = {}
    for _, v in ipairs(split_requirements(set:sub(2, -2))) do
      v = trim(v)
      if not v:match("^" .. VALUE .. "$") then return nil end
      values[v] = true
    end
    if next(values) == nil then return nil end
    if op == "in" then return function(l) return l[key] ~= nil and values[l[key]] == true end end
    return function(l) return l[key] == nil or not values[l[key]] end
  end
  local value
  key, value = part:match("^" .. KEY .. "%s*!=%s*" .. VALUE .. "$")
  if key then return function(l) return l[key] ~= value end end
  key, value = part:match("^" .. KEY .. "%s*==?%s*" .. VALUE .. "$")
  if key then return function(l) return l[key] == value end end
  key, op, value = part:match("^" .. KEY .. "%s*([<>])%s*(%-?%d+)$")
  if key then
    local n = tonumber(value)
    return function(l)
      local v = l[key] and tonumber(l[key])
      if not v then return false end
      if op == ">" then return v > n end
      return v < n
    end
  end
  key = part:match("^" .. KEY .. "$")
  if key then return function(l) return l[key] ~= nil end end
  return nil
end

-- A label selector: a function of the object | nil, what is wrong.
local function parse_labels(s)
  s = trim(s or "")
  if s == "" then return function() return true end end
  local reqs = {}
  for _, part in ipairs(split_requirements(s)) do
    local req = label_requirement(trim(part))
    if not req then
      return nil, ("unable to parse requirement: %q is not a label selector requirement (key, !key, key=value, "
        .. "key!=value, key in (a,b), key notin (a,b))"):format(trim(part))
    end
    reqs[#reqs + 1] = req
  end
  return function(obj)
    local labels = obj.metadata.labels or {}
    for _, req in ipairs(reqs) do
      if not req(labels) then return false end
    end
    return true
  end
end

-- Fields whose absence reads "false", as the API server's field sets have them.
local BOOL_FIELDS = { ["spec.hostNetwork"] = true, ["spec.unschedulable"] = true }

local function field_value(k, obj, field)
  if field == "metadata.namespace" and not k.namespaced then return "" end
  local v = obj
  for part in (k.field_paths[field] or field):gmatch("[^.]+") do
    if type(v) ~= "table" then
      v = nil
      break
    end
    v = v[part]
  end
  if v == nil and BOOL_FIELDS[field] then return "false" end
  if type(v) == "string" then return v end
  if type(v) == "boolean" or math.type(v) then return tostring(v) end
  return ""
end

-- Terms of a field selector, split on unescaped commas: {key, op, value} | nil, err.
local function field_terms(s)
  local terms, parts, cur, i = {}, {}, {}, 1
  while i <= #s do
    local c = s:sub(i, i)
    if c == "\\" then
      cur[#cur + 1] = s:sub(i, i + 1)
      i = i + 1
    elseif c == "," then
      parts[#parts + 1] = table.concat(cur)
      cur = {}
    else
      cur[#cur + 1] = c
    end
    i = i + 1
  end
  parts[#parts + 1] = table.concat(cur)
  for _, part in ipairs(parts) do
    local key, op, value
    for j = 1, #part do
      if part:sub(j - 1, j - 1) ~= "\\" then
        for _, o in ipairs { "!=", "==", "=" } do
          if part:sub(j, j + #o - 1) == o then
            key, op, value = part:sub(1, j - 1), o, part:sub(j + #o)
            break
          end
        end
      end
      if key then break end
    end
    if not key then return nil, ("invalid selector: '%s'; can't understand '%s'"):format(s, part) end
    value = value:gsub("\\(.)", "%1")
    terms[#terms + 1] = { key = trim(key), op = op == "!=" and "!=" or "=", value = value }
  end
  return terms
end

-- A field selector of kind k: a function of the object | nil, what is wrong.
local function parse_fields(k, s)
  s = trim(s or "")
  if s == "" then return function() return true end end
  local terms, err = field_terms(s)
  if not terms then return nil, err end
  for _, t in ipairs(terms) do
    if not k.field_labels[t.key] then
      if k.field_style == "custom" then return nil, "field label not supported: " .. t.key end
      return nil, ('"%s" is not a known field selector: only "metadata.name", "metadata.namespace"'):format(t.key)
    end
  end
  return function(obj)
    for _, t in ipairs(terms) do
      local v = field_value(k, obj, t.key)
      if (t.op == "=") ~= (v == t.value) then return false end
    end
    return true
  end
end

local function selectors(k, q)
  local labels, err = parse_labels(q.labelSelector)
  if not labels then return nil, bad_request(err) end
  local fields
  fields, err = parse_fields(k, q.fieldSelector)
  if not fields then return nil, bad_request(err) end
  return function(obj) return labels(obj) and fields(obj) end
end

-- ---- patches -------------------------------------------------------------------------

-- RFC 7386 into target, a table of the caller's (changed in place).
local function merge_into(target, patch)
  for key, v in pairs(patch) do
    if v == null then
      target[key] = nil
    elseif is_object(v) then
      local t = target[key]
      target[key] = merge_into(is_object(t) and t or {}, v)
    else
      target[key] = copy(v)
    end
  end
  return target
end

-- Strategic merge patch: lists with a merge key merge by it, finalizers
-- merge as a set; every other list is replaced. $patch: delete|replace,
-- $deleteFromPrimitiveList/<list> are understood; $setElementOrder and
-- $retainKeys are ignored. An approximation of the schema-driven original.
local MERGE_KEYS = {
  containers = "name", initContainers = "name", ephemeralContainers = "name", volumes = "name", env = "name",
  volumeMounts = "mountPath", imagePullSecrets = "name", conditions = "type", ownerReferences = "uid",
  hostAliases = "ip", ports = "port",
}
local MERGE_SETS = { finalizers = true }

local strategic_into

local function merge_list(key, cur, patch)
  local out = array(copy(cur))
  if MERGE_SETS[key] then
    for _, v in ipairs(patch) do
      if not has(out, v) then out[#out + 1] = copy(v) end
    end
    return out
  end
  local mk = MERGE_KEYS[key]
  if key == "ports" and is_object(patch[1]) and patch[1].containerPort ~= nil then mk = "containerPort" end
  for _, item in ipairs(patch) do
    if is_object(item) and item["$patch"] == "replace" then
      local only = array()
      for _, x in ipairs(patch) do
        if not (is_object(x) and x["$patch"]) then only[#only + 1] = copy(x) end
      end
      return only
    end
  end
  for _, item in ipairs(patch) do
    local at
    for i, x in ipairs(out) do
      if is_object(item) and is_object(x) and item[mk] ~= nil and x[mk] == item[mk] then at = i end
    end
    if is_object(item) and item["$patch"] == "delete" then
      if at then table.remove(out, at) end
    elseif at then
      out[at] = strategic_into(out[at], item)
    else
      local new = copy(item)
      if is_object(new) then new["$patch"] = nil end
      out[#out + 1] = new
    end
  end
  return out
end

local function strategic_field(target, key, v)
  if v == null or (is_object(v) and v["$patch"] == "delete") then
    target[key] = nil
  elseif is_object(v) then
    local t = target[key]
    target[key] = strategic_into(is_object(t) and t or {}, v)
  elseif is_array(v) and is_array(target[key]) and (MERGE_KEYS[key] or MERGE_SETS[key]) then
    target[key] = merge_list(key, target[key], v)
  else
    target[key] = copy(v)
  end
end

strategic_into = function(target, patch)
  if patch["$patch"] == "replace" then
    local out = copy(patch)
    out["$patch"] = nil
    return out
  end
  for key, v in pairs(patch) do
    -- directives ($...) are applied after the fields
    if not (type(key) == "string" and key:sub(1, 1) == "$") then strategic_field(target, key, v) end
  end
  for key, v in pairs(patch) do
    local list = type(key) == "string" and key:match("^%$deleteFromPrimitiveList/(.+)$")
    if list and is_array(v) and is_array(target[list]) then
      local out = array()
      for _, x in ipairs(target[list]) do
        if not has(v, x) then out[#out + 1] = x end
      end
      target[list] = out
    end
  end
  return target
end

-- RFC 6902 on doc (changed in place): the new document | nil, failure.
local function pointer(path)
  if type(path) ~= "string" or (path ~= "" and path:sub(1, 1) ~= "/") then return nil end
  local toks = {}
  for tok in (path:sub(2) .. "/"):gmatch("(.-)/") do
    toks[#toks + 1] = (tok:gsub("~1", "/"):gsub("~0", "~"))
  end
  if path == "" then toks = {} end
  return toks
end

local function array_index(tok, n, append_ok)
  if append_ok and tok == "-" then return n + 1 end
  local i = tok:match("^%d+$") and tonumber(tok)
  if not i or i > (append_ok and n or n - 1) then return nil end
  return i + 1
end

-- The container holding the last token of toks, and that token.
local function parent_of(doc, toks)
  local c = doc
  for i = 1, #toks - 1 do
    if is_array(c) then
      local idx = array_index(toks[i], #c)
      c = idx and c[idx]
    elseif type(c) == "table" then
      c = c[toks[i]]
    else
      c = nil
    end
    if type(c) ~= "table" then return nil end
  end
  return c, toks[#toks]
end

local function get_at(doc, toks)
  if #toks == 0 then return doc end
  local c, last = parent_of(doc, toks)
  if not c then return nil end
  if is_array(c) then
    local idx = array_index(last, #c)
    return idx and c[idx]
  end
  return c[last]
end

local function add_at(doc, toks, value)
  if #toks == 0 then return value end
  local c, last = parent_of(doc, toks)
  if not c then return nil end
  if is_array(c) then
    local idx = array_index(last, #c, true)
    if not idx then return nil end
    table.insert(c, idx, value)
  else
    c[last] = value
  end
  return doc
end

local function remove_at(doc, toks)
  local c, last = parent_of(doc, toks)
  if not c or #toks == 0 then return nil end
  if is_array(c) then
    local idx = array_index(last, #c)
    if not idx then return nil end
    return table.remove(c, idx)
  end
  local v = c[last]
  c[last] = nil
  return v
end

local function json_patch(doc, ops)
  if not is_array(ops) then
    return nil, bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
  end
  -- The API server answers a patch that does not apply with a generic 422
  -- (NewGenericServerResponse drops json-patch's words); they are kept
  -- here as the cause, for the test's reader.
  local function fail(msg)
    return nil, failure(422, "Invalid", "the server rejected our request due to an error in our request",
      { causes = array { { message = msg } } })
  end
  for _, op in ipairs(ops) do
    if not is_object(op) then return fail("Unexpected kind: unknown object type") end
    local path = pointer(op.path)
    if not path then return fail(("add operation does not apply: doc is missing path: %q: missing value")
      :format(tostring(op.path))) end
    local value = op.value
    if value == nil then value = null end
    local kind = op.op
    if kind == "add" then
      local d = add_at(doc, path, copy(value))
      if d == nil then return fail(("add operation does not apply: doc is missing path: %q: missing value")
        :format(op.path)) end
      doc = d
    elseif kind == "remove" then
      if get_at(doc, path) == nil or remove_at(doc, path) == nil then
        return fail(("remove operation does not apply: doc is missing path: %q: missing value"):format(op.path))
      end
    elseif kind == "replace" then
      if get_at(doc, path) == nil then
        return fail(("replace operation does not apply: doc is missing key: %s: missing value"):format(op.path))
      end
      if #path == 0 then
        doc = copy(value)
      else
        remove_at(doc, path)
        doc = add_at(doc, path, copy(value))
      end
    elseif kind == "move" or kind == "copy" then
      local from = pointer(op.from)
      local v = from and get_at(doc, from)
      if v == nil then
        return fail(("%s operation does not apply: doc is missing from path: %s: missing value")
          :format(kind, tostring(op.from)))
      end
      if kind == "move" then remove_at(doc, from) else v = copy(v) end
      local d = add_at(doc, path, v)
      if d == nil then return fail(("%s operation does not apply: doc is missing destination path: %s: missing value")
        :format(kind, op.path)) end
      doc = d
    elseif kind == "test" then
      local v = get_at(doc, path)
      if v == nil then v = null end
      if not same(v, value) then return fail(("testing value %s failed: test failed"):format(op.path)) end
    else
      return fail(("Unexpected kind: %s: unknown object type"):format(tostring(kind)))
    end
  end
  return doc
end

local PATCH_TYPES = {
  ["application/merge-patch+json"] = "merge", ["application/json-patch+json"] = "json",
  ["application/strategic-merge-patch+json"] = "strategic", ["application/apply-patch+yaml"] = "apply",
}

local function unsupported_patch(k)
  local types = { "application/json-patch+json", "application/merge-patch+json" }
  if k.strategic then types[#types + 1] = "application/strategic-merge-patch+json" end
  types[#types + 1] = "application/apply-patch+yaml"
  return failure(415, "UnsupportedMediaType",
    "the body of the request was in an unknown format - accepted media types include: " .. table.concat(types, ", "))
end

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
        field_labels = fields, crd = md.name,
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

-- ---- verbs ---------------------------------------------------------------------------------

local function dry_run(r) return r.query.dryRun == "All" end

-- The request's body as an object of kind k (a copy) | nil, failure.
local function body_object(r, k)
  local obj = r.decoded
  if r.decode_err or not is_object(obj) then
    return nil, bad_request(("the object provided is unrecognized (must be of type %s): %s"):format(k.kind,
      r.decode_err or "not a JSON object"))
  end
  obj = drop_nulls(copy(obj))
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
  if k.store == CRD_STORE then
    local kinds, cerrs = crd_kinds(obj)
    if not kinds then return nil, invalid_object(k, md.name, cerrs) end
    if not dry then self:_serve_crd(obj, kinds) end
  end
  md.uid = nonempty(md.uid) and md.uid or self:_uid()
  md.creationTimestamp = md.creationTimestamp or timestamp(self.now())
  md.generation = md.generation or 1
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
  if k.keep_on_update then k.keep_on_update(new, old) end
  if k.store == CRD_STORE then
    local kinds, cerrs = crd_kinds(new)
    if not kinds then return invalid_object(k, omd.name, cerrs) end
    if not dry then
      for _, spec in ipairs(kinds) do self:add_kind(spec) end
    end
  end
  if spec_text(k, new) ~= spec_text(k, old) then md.generation = (omd.generation or 0) + 1 end
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

-- ---- requests, the action log, injected failures -------------------------------------------

local function verb_of(method, r)
  if method == "GET" then return r.name and "get" or "list" end
  if method == "POST" then return not r.name and r.k.namespaced == (r.namespace ~= nil) and "create" or nil end
  if method == "PUT" then return r.name and "update" or nil end
  if method == "PATCH" then return r.name and "patch" or nil end
  if method == "DELETE" and not r.sub then return r.name and "delete" or "deletecollection" end
  return nil
end

local REASON_CODES = {
  BadRequest = 400, Unauthorized = 401, Forbidden = 403, NotFound = 404, MethodNotAllowed = 405,
  AlreadyExists = 409, Conflict = 409, Gone = 410, Expired = 410, RequestEntityTooLarge = 413,
  UnsupportedMediaType = 415, Invalid = 422, TooManyRequests = 429, InternalError = 500,
  ServiceUnavailable = 503, Timeout = 504,
}
local CODE_REASONS = {
  [400] = "BadRequest", [401] = "Unauthorized", [403] = "Forbidden", [404] = "NotFound", [405] = "MethodNotAllowed",
  [409] = "Conflict", [410] = "Expired", [413] = "RequestEntityTooLarge", [415] = "UnsupportedMediaType",
  [422] = "Invalid", [429] = "TooManyRequests", [500] = "InternalError", [503] = "ServiceUnavailable",
  [504] = "Timeout",
}

-- The failure an injected rule answers, worded as the API server would.
function Server:_injected_failure(rule, e, k)
  local code = rule.code or REASON_CODES[rule.reason] or 500
  local reason = rule.reason or CODE_REASONS[code] or "InternalError"
  local name = e.name or ""
  local f
  if reason == "Conflict" then
    f = conflict(k, name, MODIFIED)
  elseif reason == "NotFound" then
    f = not_found(k, name)
  elseif reason == "AlreadyExists" then
    f = already_exists(k, name)
  elseif reason == "Invalid" then
    f = invalid_object(k, name, { field_error("metadata.name", "Invalid", "injected by the test", quote(name)) })
  elseif reason == "Forbidden" then
    local where = k.namespaced and e.namespace and (' in the namespace "%s"'):format(e.namespace)
      or " at the cluster scope"
    local resource = k.resource .. (e.subresource and "/" .. e.subresource or "")
    f = forbidden(k, name, ('User "system:serviceaccount:default:luaop" cannot %s resource "%s" in API group "%s"%s')
      :format(e.verb, resource, k.group, where))
  elseif reason == "Expired" or reason == "Gone" then
    f = expired(self.rv, self.rv)
  else
    local messages = {
      InternalError = "Internal error occurred: injected by the test",
      ServiceUnavailable = "the server is currently unable to handle the request",
      TooManyRequests = "Too many requests, please try again later.",
      Timeout = "Timeout: request did not complete within requested timeout - context deadline exceeded",
      BadRequest = "the server rejected our request for an unknown reason",
    }
    f = failure(code, reason, messages[reason] or reason, resource_details(k, name))
  end
  f.code, f.reason = code, reason
  if rule.message then f.message = rule.message end
  if rule.details then f.details = copy(rule.details) end
  return f
end

-- Whether spec names kind k: "pods", "po", "Pod", "v1/Pod", "deployments.apps",
-- "apps/v1/Deployment".
local function names_kind(spec, k)
  return spec == k.kind or spec == k.resource or spec == k.resource .. "." .. k.group
    or spec == k.gv .. "/" .. k.kind or spec == k.gv .. "/" .. k.resource or has(k.short_names, spec)
end

local function rule_matches(rule, e, k)
  if rule.verb and rule.verb ~= e.verb then return false end
  if rule.resource and not names_kind(rule.resource, k) then return false end
  if rule.kind and not names_kind(rule.kind, k) then return false end
  if rule.group and rule.group ~= k.group then return false end
  if rule.subresource == "" and e.subresource then return false end
  if nonempty(rule.subresource) and rule.subresource ~= e.subresource then return false end
  if rule.namespace and rule.namespace ~= e.namespace then return false end
  if rule.name and rule.name ~= e.name then return false end
  return true
end

-- The first rule that matches entry e takes one of its times: its failure | nil.
function Server:_take_rule(e, k)
  for i, rule in ipairs(self.rules) do
    if rule_matches(rule, e, k) then
      rule.times = rule.times - 1
      if rule.times <= 0 then table.remove(self.rules, i) end
      return self:_injected_failure(rule, e, k)
    end
  end
end

-- A new entry of the action log for request r.
function Server:_log(r)
  local k = r.k
  self.seq = self.seq + 1
  local e = { seq = self.seq, verb = r.verb, resource = k.resource, group = k.group, version = k.version,
    kind = k.kind, namespace = r.namespace, name = r.name, subresource = r.sub,
    dry_run = r.query.dryRun == "All" or nil, field_manager = r.query.fieldManager }
  local body = r.decoded
  if r.verb == "create" then
    e.object = copy(body)
    local md = is_object(body) and is_object(body.metadata) and body.metadata or {}
    if nonempty(md.name) then e.name = md.name end
  elseif r.verb == "update" then
    e.object = copy(body)
  elseif r.verb == "patch" then
    e.patch = copy(body)
    e.patch_type = r.ctype and r.ctype:match("^[^;]*")
  elseif r.verb == "delete" or r.verb == "deletecollection" then
    e.options = copy(body)
  end
  if r.verb == "list" or r.verb == "watch" or r.verb == "deletecollection" then
    e.label_selector = nonempty(r.query.labelSelector) and r.query.labelSelector or nil
    e.field_selector = nonempty(r.query.fieldSelector) and r.query.fieldSelector or nil
  end
  if r.verb == "watch" then e.resource_version = r.query.resourceVersion end
  self.log[#self.log + 1] = e
  return e
end

-- Serve one request (see the header): HTTP status, response body (JSON).
function Server:request(method, path, body, content_type)
  if type(method) ~= "string" then error("request needs a method", 2) end
  if type(path) ~= "string" or path:sub(1, 1) ~= "/" then error("request needs a path that starts with /", 2) end
  local segs, query = split_path(path)
  local r, err = self:_route(segs)
  if not r then return err.code, status_text(err) end
  if r.discovery then
    if method ~= "GET" then return 405, status_text(method_not_allowed()) end
    return 200, encode(r.discovery)
  end
  r.query, r.body, r.ctype = query, body, content_type
  r.verb = verb_of(method, r)
  if not r.verb then return 405, status_text(method_not_allowed()) end
  if body ~= nil and body ~= "" then
    r.decoded, r.decode_err = decode(body)
    if r.decoded == nil and not r.decode_err then r.decode_err = "empty body" end
  end
  local e = self:_log(r)
  local injected = self:_take_rule(e, r.k)
  if injected then
    e.injected, e.code, e.reason = true, injected.code, injected.reason
    return injected.code, status_text(injected)
  end
  local code, res, raw = self["_" .. r.verb](self, r)
  if not code then
    e.code, e.reason = res.code, res.reason
    return res.code, status_text(res)
  end
  if not raw and r.verb ~= "list" and r.verb ~= "deletecollection" then res = view(r.k, res) end
  e.code = code
  -- create and update log what was sent, and what came back beside it
  if r.verb == "create" or r.verb == "update" then e.result = copy(res) else e.object = copy(res) end
  return code, encode(res)
end

-- ---- watches ---------------------------------------------------------------------------------

-- A watch of path (see the header): w:next() -> line | nil | nil, status, body.
function Server:watch(path)
  if type(path) ~= "string" or path:sub(1, 1) ~= "/" then error("watch needs a path that starts with /", 2) end
  local w = setmetatable({ server = self, path = path, cond = core.task.cond(), lines = {}, head = 1, tail = 0,
    pos = 1 }, Watch)
  local segs, query = split_path(path)
  local r, err = self:_route(segs)
  if r and r.discovery then r, err = nil, method_not_allowed() end
  if not r then return w:_end(err) end
  r.query, r.verb = query, "watch"
  local e = self:_log(r)
  local injected = self:_take_rule(e, r.k)
  if injected then
    e.injected, e.code, e.reason = true, injected.code, injected.reason
    return w:_end(injected)
  end
  local match
  match, err = selectors(r.k, query)
  if not match then
    e.code, e.reason = err.code, err.reason
    return w:_end(err)
  end
  w.k, w.namespace, w.name, w.match = r.k, r.namespace, r.name, match
  local rv = query.resourceVersion or ""
  w.rv = self.rv
  if query.sendInitialEvents == "true" then
    -- the streaming list: the state as ADDED, a bookmark marking its end,
    -- then the changes (kube-apiserver wants NotOlderThan with it)
    if query.resourceVersionMatch ~= "NotOlderThan" or query.allowWatchBookmarks ~= "true" then
      err = invalid_options("ListOptions", { query.allowWatchBookmarks ~= "true"
        and field_error("allowWatchBookmarks", "Forbidden",
          "sendInitialEvents requires setting allowWatchBookmarks to true")
        or field_error("resourceVersionMatch", "Forbidden",
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan") })
      e.code, e.reason = err.code, err.reason
      return w:_end(err)
    end
    for _, obj in ipairs(self:_sorted(r.k, r.namespace)) do
      if w:_selects(obj) then w:_push(encode { type = "ADDED", object = view(r.k, obj) }) end
    end
    w:_push(encode { type = "BOOKMARK", object = { apiVersion = r.k.gv, kind = r.k.kind,
      metadata = { resourceVersion = tostring(self.rv), annotations = { ["k8s.io/initial-events-end"] = "true" } } } })
    w.pos = #self.events + 1
  elseif rv == "" or rv == "0" then
    -- the state first, as ADDED, then what changes from now on
    for _, obj in ipairs(self:_sorted(r.k, r.namespace)) do
      if w:_selects(obj) then w:_push(encode { type = "ADDED", object = view(r.k, obj) }) end
    end
    w.pos = #self.events + 1
  else
    local n = math.tointeger(tonumber(rv))
    if not n or n < 0 then
      err = bad_request(("invalid resource version: %q"):format(rv))
    elseif n < self.oldest then
      err = expired(n, self.oldest)
    end
    if err then
      e.code, e.reason = err.code, err.reason
      return w:_end(err)
    end
    w.rv = n
    -- the first event after n (events are in resourceVersion order)
    local lo, hi = 1, #self.events + 1
    while lo < hi do
      local mid = (lo + hi) // 2
      if self.events[mid].rv > n then hi = mid else lo = mid + 1 end
    end
    w.pos = lo
  end
  e.code = 200
  self.watches[w] = true
  return w
end

function Watch:_push(line)
  self.tail = self.tail + 1
  self.lines[self.tail] = line
end

function Watch:_selects(obj)
  local md = obj.metadata
  if self.namespace and md.namespace ~= self.namespace then return false end
  if self.name and md.name ~= self.name then return false end
  return self.match(obj)
end

-- An event as this watch sees it: type, object | nil. An object that stops
-- matching the selectors arrives as DELETED, one that starts as ADDED.
function Watch:_translate(ev)
  if ev.store ~= self.k.store then return nil end
  local now_in = self:_selects(ev.object)
  if ev.type == "ADDED" then return now_in and "ADDED" or nil, ev.object end
  if ev.type == "DELETED" then
    local was_in = now_in
    if ev.old then was_in = self:_selects(ev.old) end
    return was_in and "DELETED" or nil, ev.object
  end
  local was_in = ev.old ~= nil and self:_selects(ev.old)
  if now_in and was_in then return "MODIFIED", ev.object end
  if now_in then return "ADDED", ev.object end
  if was_in then return "DELETED", ev.object end
  return nil
end

function Watch:_scan()
  local events = self.server.events
  while self.pos <= #events do
    local ev = events[self.pos]
    self.pos = self.pos + 1
    self.rv = ev.rv
    local typ, obj = self:_translate(ev)
    if typ then return encode { type = typ, object = view(self.k, obj) } end
  end
end

-- The next event's JSON line, waiting (yielding the task) until there is
-- one | nil (ended cleanly, or closed) | nil, status, body (an error).
function Watch:next()
  while true do
    local line = self.lines[self.head]
    if self.ended and not (self.drain and line) then
      if self.err then return nil, self.err.code, status_text(self.err) end
      return nil
    end
    if line then
      self.lines[self.head] = nil
      self.head = self.head + 1
      return line
    end
    line = not self:_held() and self:_scan()
    if line then return line end
    if self.waiting then error("another task is already waiting on this watch", 2) end
    self.waiting = true
    self.cond:wait()
    self.waiting = false
  end
end

-- Whether changes are held back from this watch now (hold_watches).
function Watch:_held()
  for _, match in ipairs(self.server.holds) do
    if type(match) == "function" then
      if match(self.path) then return true end
    elseif self.path:find(match) then
      return true
    end
  end
  return false
end

-- End the watch with err (a failure) or cleanly (nil); returns it. With
-- drain, the events so far are still delivered first (a server that ends
-- a stream has sent what it had).
function Watch:_end(err, drain)
  if self.ended then return self end
  if drain and self.k then
    for line in function() return self:_scan() end do self:_push(line) end
  end
  self.ended, self.err, self.drain = true, err, drain
  self.server.watches[self] = nil
  self.cond:signal()
  return self
end

-- Stop the watch; a next() waiting on it returns nil.
function Watch:close()
  self:_end(nil)
end
Watch.__close = Watch.close

-- Every open watch ends with 410 Expired, and resourceVersions handed out
-- so far become too old to watch from (a relist is due).
function Server:expire_watches()
  self.oldest = self.rv
  for w in pairs(self.watches) do w:_end(expired(w.rv, self.oldest)) end
end

-- Every open watch ends cleanly, as when the API server's timeout ends it.
function Server:end_watches()
  for w in pairs(self.watches) do w:_end(nil, true) end
end

-- Hold back the changes from the watches whose path `match` picks (a Lua
-- pattern, or a function(path) -> boolean), opened now or later, until
-- release_watches(): then they get them, in order. Two watches of a real
-- API server are not in step: one informer's cache can lag another's by
-- any time (a busy apiserver, a client that did not read its socket yet).
-- What a watch sends when it starts (the state, for a list by watch) is
-- not held.
function Server:hold_watches(match)
  if type(match) ~= "string" and type(match) ~= "function" then
    error("hold_watches needs a pattern or a function of the watch's path", 2)
  end
  self.holds[#self.holds + 1] = match
end

function Server:release_watches()
  self.holds = {}
  for w in pairs(self.watches) do
    if w.waiting then w.cond:signal() end
  end
end

-- ---- for tests -------------------------------------------------------------------------------

-- The kind a name means (see names_kind); raises when none.
function Server:_kind(spec)
  if type(spec) ~= "string" then error("a kind or resource name is required", 3) end
  for _, gvname in ipairs(self:_gv_order()) do
    local gv = self.gvs[gvname]
    for _, res in ipairs(gv.order) do
      if names_kind(spec, gv.kinds[res]) then return gv.kinds[res] end
    end
  end
  error(("the server serves no kind or resource %q"):format(spec), 3)
end

-- Group versions, core first, then each group's in preference order.
function Server:_gv_order()
  local out = { "v1" }
  for _, g in ipairs(self.group_order) do
    for _, v in ipairs(self.groups[g].versions) do out[#out + 1] = g .. "/" .. v end
  end
  return out
end

-- The current objects of a kind (any of names_kind's spellings), in
-- namespace ns or all, by namespace and name: copies.
function Server:objects(kind, ns)
  local k = self:_kind(kind)
  local out = {}
  for _, obj in ipairs(self:_sorted(k, k.namespaced and ns or nil)) do out[#out + 1] = copy(view(k, obj)) end
  return out
end

-- One object (a copy) | nil; get(kind, name) for a cluster-scoped one.
function Server:get(kind, ns, name)
  if name == nil then ns, name = nil, ns end
  local k = self:_kind(kind)
  local obj = self.stores[k.store][okey(k, ns or "", name)]
  return obj and copy(view(k, obj)) or nil
end

-- Seeding an object that exists replaces it (its uid and creationTimestamp
-- stay unless given; its status too unless given): MODIFIED.
function Server:_reseed(k, old, obj)
  local md, omd = obj.metadata, old.metadata
  md.uid = nonempty(md.uid) and md.uid or omd.uid
  md.creationTimestamp = md.creationTimestamp or omd.creationTimestamp
  md.generation = md.generation or omd.generation
  md.resourceVersion, md.managedFields = omd.resourceVersion, nil
  if obj.status == nil then obj.status = copy(old.status) end
  if k.prepare then k.prepare(obj) end
  obj.apiVersion = old.apiVersion
  if same(obj, old) then return old end
  return self:_write(k, old, obj)
end

-- Put an object in as a create would (name from generateName, uid,
-- resourceVersion, creationTimestamp, generation; its namespace made when
-- missing), keeping its status; no action is logged. An object that
-- exists is replaced. Returns it (a copy).
function Server:seed(obj)
  obj = canonical(obj)
  if not is_object(obj) or not nonempty(obj.apiVersion) or not nonempty(obj.kind) then
    error("seed needs an object with apiVersion and kind", 2)
  end
  local gv = self.gvs[obj.apiVersion]
  local k
  for _, res in ipairs(gv and gv.order or {}) do
    if gv.kinds[res].kind == obj.kind then k = gv.kinds[res] end
  end
  if not k then error(("seed: the server serves no %s %s"):format(obj.apiVersion, obj.kind), 2) end
  drop_nulls(obj)
  if not is_object(obj.metadata) then obj.metadata = {} end
  local ns = k.namespaced and (nonempty(obj.metadata.namespace) and obj.metadata.namespace or "default") or nil
  local old = nonempty(obj.metadata.name) and self:_find(k, ns, obj.metadata.name)
  if old then
    obj.metadata.namespace = ns
    return copy(view(k, self:_reseed(k, old, obj)))
  end
  local code, res = self:_create_object(k, ns, obj, false, true)
  if not code then error("seed: " .. res.message, 2) end
  return copy(view(k, res))
end

-- Serve a CRD (an apiextensions.k8s.io/v1 CustomResourceDefinition): each
-- served version's kind, with /status where the version has it; the CRD
-- itself is stored as well (again: its kinds are updated).
function Server:add_crd(crd)
  crd = canonical(crd)
  if not is_object(crd) or crd.kind ~= "CustomResourceDefinition" then
    error("add_crd needs a CustomResourceDefinition", 2)
  end
  crd.apiVersion = "apiextensions.k8s.io/v1"
  crd.metadata = is_object(crd.metadata) and crd.metadata or {}
  local kinds, errs = crd_kinds(crd)
  if not kinds then
    local e = invalid_object(self.crd_kind, crd.metadata.name, errs)
    error("add_crd: " .. e.message, 2)
  end
  local old = self:_find(self.crd_kind, nil, crd.metadata.name)
  if not old then return self:seed(crd) end
  local new = copy(old)
  new.spec = crd.spec
  self:_serve_crd(new, kinds)
  if not same(new, old) then self:_write(self.crd_kind, old, new) end
  return copy(self:_find(self.crd_kind, nil, crd.metadata.name))
end

-- The action log from entry `first` (default 1) on: copies of {seq, verb,
-- resource, group, version, kind, namespace, name, subresource, object,
-- patch, patch_type, options, label_selector, field_selector,
-- resource_version, dry_run, field_manager, code, reason, injected}.
function Server:actions(first)
  local out = {}
  for i = first or 1, #self.log do out[#out + 1] = copy(self.log[i]) end
  return out
end

-- The last action (a copy) | nil.
function Server:last_action()
  return copy(self.log[#self.log])
end

function Server:clear_actions()
  self.log = {}
end

-- Make the next `times` matching requests fail (see the header); returns
-- the rule (rule.times counts down). Matches on verb, resource or kind
-- (any spelling names_kind takes), group, subresource (nil: any; "": the
-- object itself), namespace, name; answers reason/code/message/details.
function Server:fail(rule)
  if type(rule) ~= "table" then error("fail needs a rule", 2) end
  rule = copy(rule)
  rule.times = rule.times or 1
  if not rule.reason and not rule.code then rule.reason = "InternalError" end
  self.rules[#self.rules + 1] = rule
  return rule
end

function Server:clear_failures()
  self.rules = {}
end

-- The current resourceVersion (the last one handed out), as a string.
function Server:resource_version()
  return tostring(self.rv)
end

-- xorshift64: names and uids from a seed, so a test can repeat them.
local function prng(seed)
  local x = seed ~= 0 and seed or 0x2545F4914F6CDD1D
  return function()
    x = x ~ (x << 13)
    x = x ~ (x >> 7)
    x = x ~ (x << 17)
    return x
  end
end

-- opts: now (the clock for timestamps: seconds since the epoch; default
-- core.task.wall), seed (an integer: the same names and uids every run).
function M.new(opts)
  opts = opts or {}
  local s = setmetatable({
    now = opts.now or core.task.wall,
    random = prng(math.tointeger(opts.seed) or math.random(0)),
    rv = 0, oldest = 0, events = {}, watches = {}, holds = {}, log = {}, seq = 0, rules = {},
    gvs = {}, groups = {}, group_order = {}, stores = {}, store_kind = {}, uids = {},
  }, Server)
  for _, spec in ipairs(BUILTIN) do s:add_kind(spec) end
  s.ns_kind = s.gvs.v1.kinds.namespaces
  s.crd_kind = s.gvs["apiextensions.k8s.io/v1"].kinds.customresourcedefinitions
  for _, name in ipairs(DEFAULT_NAMESPACES) do
    s:_create_object(s.ns_kind, nil, { apiVersion = "v1", kind = "Namespace", metadata = { name = name } }, false, true)
  end
  return s
end

return M
