-- luaop.webhook.review - AdmissionReview and ConversionReview (v1): what
-- the API server sends, read and checked; a handler called on it (in the
-- handler's own task, under its budgets: luaop.webhook); and the review it
-- answers.
--
-- The handler contract (docs/webhooks.md):
--   validate(req, res)      -> nothing or true: allowed; false, message: denied
--   mutate(obj, req, res)   -> nothing or true: allowed with obj as it left it
--                              changed in place; a table: the object to admit;
--                              false, message: denied (not called for a
--                              request without an object, a DELETE: allowed)
--   convert(obj, version)   -> the object in that version
-- req is the review's request as decoded (uid, kind, resource, operation,
-- object, oldObject, userInfo, dryRun, ...); obj a copy of its object;
-- res:warn(text) adds a warning (kubectl prints them), allowed or not. A
-- denial answers allowed false with status {code 403, reason Forbidden,
-- message}, as controller-runtime's admission.Denied does.
local core = require "luaop.core"
local object = require "luaop.object"
local patch = require "luaop.webhook.patch"
local base64 = require "luaop.base64"

local json = core.json
local shown = require("luaop.client.errors").shown

local M = {}

M.ADMISSION_VERSIONS = { ["admission.k8s.io/v1"] = true, ["admission.k8s.io/v1beta1"] = true }
M.CONVERSION_VERSIONS = { ["apiextensions.k8s.io/v1"] = true, ["apiextensions.k8s.io/v1beta1"] = true }

-- The AdmissionReview t is, or nil, why (for a 400).
function M.admission(t)
  if type(t) ~= "table" or json.is_array(t) then return nil, "the body is not a JSON object" end
  if t.kind ~= "AdmissionReview" or not M.ADMISSION_VERSIONS[t.apiVersion] then
    return nil, ("the body is not an AdmissionReview (admission.k8s.io/v1): apiVersion %s, kind %s")
      :format(shown(t.apiVersion), shown(t.kind))
  end
  local r = t.request
  if type(r) ~= "table" or json.is_array(r) then return nil, "the AdmissionReview has no request" end
  if type(r.uid) ~= "string" or r.uid == "" then return nil, "the AdmissionReview's request has no uid" end
  if r.object ~= nil and r.object ~= json.null and (type(r.object) ~= "table" or json.is_array(r.object)) then
    return nil, "the AdmissionReview's request.object is not an object"
  end
  return t
end

-- The ConversionReview t is, or nil, why.
function M.conversion(t)
  if type(t) ~= "table" or json.is_array(t) then return nil, "the body is not a JSON object" end
  if t.kind ~= "ConversionReview" or not M.CONVERSION_VERSIONS[t.apiVersion] then
    return nil, ("the body is not a ConversionReview (apiextensions.k8s.io/v1): apiVersion %s, kind %s")
      :format(shown(t.apiVersion), shown(t.kind))
  end
  local r = t.request
  if type(r) ~= "table" or json.is_array(r) then return nil, "the ConversionReview has no request" end
  if type(r.uid) ~= "string" or r.uid == "" then return nil, "the ConversionReview's request has no uid" end
  if type(r.desiredAPIVersion) ~= "string" or not r.desiredAPIVersion:match("^[^/]+/[^/]+$") then
    return nil, "the ConversionReview's request.desiredAPIVersion is not group/version"
  end
  if type(r.objects) ~= "table" or (next(r.objects) ~= nil and not json.is_array(r.objects)) then
    return nil, "the ConversionReview's request.objects is not a list"
  end
  for i, o in ipairs(r.objects) do
    if type(o) ~= "table" or type(o.apiVersion) ~= "string" or type(o.kind) ~= "string" then
      return nil, ("the ConversionReview's request.objects[%d] has no apiVersion and kind"):format(i - 1)
    end
  end
  return t
end

-- The group of an apiVersion ("" for the core group's "v1").
function M.group_of(api_version)
  return api_version:match("^(.*)/[^/]*$") or ""
end

-- ---- the handlers, called in their task ----------------------------------------------------

-- res, and the list of its warnings: kept apart from res, so that a
-- handler setting res.warnings (or anything else of res) answers nothing
-- but what res:warn took.
local function responder()
  local res, warnings = {}, nil
  function res.warn(_, text)
    if type(text) ~= "string" then error("res:warn(text) takes a string, got " .. shown(text), 2) end
    warnings = warnings or json.array {}
    warnings[#warnings + 1] = text
  end
  return res, function() return warnings end
end

-- Whether a handler's returned v is a JSON object (not a list, marked or
-- with a first element: as the API server, and a patch from it, needs).
local function is_object(v)
  return type(v) == "table" and not json.is_array(v) and rawget(v, 1) == nil
end

local function denial(allowed, message, who)
  if allowed == false then
    if message ~= nil and type(message) ~= "string" then
      error(("%s returned false and a %s: the message of a denial is a string"):format(who, type(message)), 0)
    end
    return { allowed = false, status = { code = 403, reason = "Forbidden",
      message = message or "denied by the webhook" } }
  end
end

-- The response to an admission request (as validate or mutate made it),
-- without its uid.
function M.admit(w, req)
  local res, warnings = responder()
  local out
  if w.kind == "validating" then
    local allowed, message = w.handler(req, res)
    out = denial(allowed, message, "validate")
    if not out then
      if allowed ~= nil and allowed ~= true then
        error(("validate returned %s: return nothing or true (allowed), or false and a message (denied)")
          :format(shown(allowed)), 0)
      end
      out = { allowed = true }
    end
  else
    local before = req.object ~= json.null and req.object or nil
    -- (a DELETE: nothing to mutate; controller-runtime's defaulter skips it too)
    if not before then return { allowed = true } end
    local obj = object.copy(before)
    local r, message = w.handler(obj, req, res)
    out = denial(r, message, "mutate")
    if not out then
      if is_object(r) then obj = r
      elseif r ~= nil and r ~= true then
        error(("mutate returned %s: return nothing or true (obj as changed), the object to admit, or false and "
          .. "a message (denied)"):format(shown(r)), 0)
      end
      out = { allowed = true }
      local ops = patch.diff(before, obj)
      if #ops > 0 then
        out.patchType = "JSONPatch"
        out.patch = base64.encode(json.encode(ops))
      end
    end
  end
  out.warnings = warnings()
  return out
end

-- The response to a conversion request, without its uid: each object
-- converted to desiredAPIVersion by its group and kind's convert (find(group,
-- kind) -> the webhook), or the first failure.
function M.convert(find, req)
  local desired = req.desiredAPIVersion
  local version = desired:match("/([^/]+)$")
  local converted = json.array {}
  for i, o in ipairs(req.objects) do
    if M.group_of(o.apiVersion) ~= M.group_of(desired) then
      error(("objects[%d] is a %s, which is not of %s's group"):format(i - 1, o.apiVersion, desired), 0)
    end
    local w = find(M.group_of(o.apiVersion), o.kind)
    if not w then
      error(("no conversion is defined for %s/%s (objects[%d])"):format(M.group_of(o.apiVersion), o.kind, i - 1), 0)
    end
    local out
    if o.apiVersion == desired then
      out = o -- (nothing to convert)
    else
      out = w.handler(object.copy(o), version)
      if not is_object(out) then
        error(("convert returned %s for %s %s: return the object in %s"):format(shown(out), o.kind,
          type(o.metadata) == "table" and tostring(o.metadata.name) or "?", version), 0)
      end
      out.apiVersion = desired
      out.kind = out.kind or o.kind
      -- (the API server refuses a conversion that changed these)
      if out.kind ~= o.kind then
        error(("convert changed the kind of %s %s to %s: a conversion keeps an object's kind"):format(o.kind,
          type(o.metadata) == "table" and tostring(o.metadata.name) or "?", shown(out.kind)), 0)
      end
      local a = type(o.metadata) == "table" and o.metadata or {}
      local b = type(out.metadata) == "table" and out.metadata or {}
      for _, f in ipairs { "name", "namespace", "uid" } do
        if a[f] ~= b[f] then
          error(("convert changed metadata.%s of %s %s (from %s to %s): a conversion keeps an object's identity")
            :format(f, o.kind, tostring(a.name), shown(a[f]), shown(b[f])), 0)
        end
      end
    end
    converted[#converted + 1] = out
  end
  return { convertedObjects = converted, result = { status = "Success" } }
end

-- The whole answer to a review, encoded: head's apiVersion and kind, the
-- response fn(...) makes (M.admit, M.convert) with head's uid. Called in
-- the handler's task, so that what the handler returned (an object whose
-- text is far larger than its tables, a DAG of shared ones) is encoded
-- under its budgets, and a value JSON cannot hold raises there (the
-- handler's error) rather than on the server's task.
function M.answer(head, fn, ...)
  local res = fn(...)
  res.uid = head.uid
  return json.encode { apiVersion = head.apiVersion, kind = head.kind, response = res }
end

return M
