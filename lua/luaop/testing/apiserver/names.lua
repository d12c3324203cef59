-- luaop.testing.apiserver.names - names and metadata, validated as the API server
-- validates them; a part of luaop.testing.apiserver.
local core = require "luaop.core"
local json = core.json
local encode, is_array = json.encode, json.is_array
local values_part = require "luaop.testing.apiserver.values"
local is_object, nonempty = values_part.is_object, values_part.nonempty
local status_part = require "luaop.testing.apiserver.status"
local field_error, quote = status_part.field_error, status_part.quote

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
-- (Namespace), "dns1035" (Service) or "path" (RBAC's: a path segment).
local function name_errors(rule, name)
  local errs, max = {}, rule == "path" and math.huge or rule == "subdomain" and 253 or 63
  if #name > max then
    errs[1] = field_error("metadata.name", "Invalid", ("must be no more than %d characters"):format(max), quote(name))
  end
  local ok, msg
  if rule == "label" then
    ok, msg = is_label(name), LABEL
  elseif rule == "dns1035" then
    ok, msg = name:match("^[a-z][-a-z0-9]*$") ~= nil and name:sub(-1) ~= "-", DNS1035
  elseif rule == "path" then
    msg = (name == "." or name == "..") and ("may not be '%s'"):format(name)
      or name:find("/", 1, true) and "may not contain '/'" or name:find("%", 1, true) and "may not contain '%'"
    ok = not msg
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

return { meta_errors = meta_errors, name_errors = name_errors }
