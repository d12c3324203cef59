-- luaop.testing.webhooks - the kit's env:admit and env:convert: a script's
-- webhooks run with no cluster and no TLS, through the very function the
-- server calls (luaop.webhook's registry:handle, with the review encoded
-- to JSON and its answer decoded), on the kit's clock.
--
--   env:admit(review_or_request [, path]) -> result
--     an AdmissionReview, its request, or just an object (a CREATE of it).
--     Without a path, as the API server does: every mutating webhook of the
--     request's kind, each seeing the object the previous one patched, then
--     every validating one, until one denies. result: { allowed, message,
--     code, reason, warnings, object (as patched), patch (the operations,
--     decoded), status (HTTP: 200, or the first other), error (its body) }
--   env:convert(obj, version) -> the object in version | nil, message
local core = require "luaop.core"
local guard = require "luaop.testing.guard"
local base64 = require "luaop.base64"
local patch = require "luaop.webhook.patch"
local object = require "luaop.object"

local kit, json = core.kit, core.json

local M = {}

-- registry:handle(...) in a task, the world run (and the clock stepped to
-- whatever is due: a handler's deadline, its sleeps) until it answered.
local function call(env, path, body)
  local out
  core.task.spawn(function()
    out = table.pack(pcall(env.manager:webhooks().handle, env.manager:webhooks(), "POST", path, "application/json",
      body))
  end)
  guard.run(env)
  for _ = 1, 10000 do
    if out then break end
    local due = kit.next_due()
    if not due then break end
    kit.advance(due)
    guard.run(env)
  end
  if not out then error(guard.where() .. "the webhook at " .. path .. " never answered", 0) end
  if not out[1] then error(out[2], 0) end
  return out[2], out[3], out[4]
end

local uids = 0

-- The AdmissionReview input stands for.
local function review_of(env, input)
  if type(input) ~= "table" then
    error(guard.where() .. "env:admit needs an AdmissionReview, a request or an object", 0)
  end
  if input.kind == "AdmissionReview" then return input end
  local req = input
  if input.apiVersion and input.kind and input.request == nil and input.operation == nil then
    req = { object = input }
  end
  req = object.copy(req)
  local obj = req.object or req.oldObject
  if type(obj) ~= "table" or type(obj.apiVersion) ~= "string" or type(obj.kind) ~= "string" then
    error(guard.where() .. "env:admit: the request's object (or oldObject) needs an apiVersion and a kind", 0)
  end
  uids = uids + 1
  local group, version = obj.apiVersion:match("^(.*)/([^/]*)$")
  group, version = group or "", version or obj.apiVersion
  local k = env.server:resolve_kind(obj.apiVersion .. "/" .. obj.kind)
  req.uid = req.uid or ("00000000-0000-4000-8000-%012d"):format(uids)
  req.kind = req.kind or { group = group, version = version, kind = obj.kind }
  req.resource = req.resource or { group = group, version = version,
    resource = k and k.resource or obj.kind:lower() .. "s" }
  req.operation = req.operation or (req.oldObject and (req.object and "UPDATE" or "DELETE") or "CREATE")
  local md = type(obj.metadata) == "table" and obj.metadata or {}
  req.name = req.name or md.name
  if not k or k.namespaced then req.namespace = req.namespace or md.namespace or env.namespace end
  req.userInfo = req.userInfo or { username = "kit", groups = json.array { "system:authenticated" } }
  if req.dryRun == nil then req.dryRun = false end
  return { apiVersion = "admission.k8s.io/v1", kind = "AdmissionReview", request = req }
end

-- The paths of the webhooks env's scripts define for a request's kind:
-- mutating ones first (in path order), then validating ones.
local function paths_for(env, kind)
  local reg = env.manager:webhooks()
  local out = { mutating = {}, validating = {} }
  for path, e in pairs(reg.paths) do
    local w = e.w
    if w and w.kind ~= "conversion" and w.group == kind.group and w.version == kind.version
      and w.resource_kind == kind.kind then
      table.insert(out[w.kind], path)
    end
  end
  table.sort(out.mutating)
  table.sort(out.validating)
  table.move(out.validating, 1, #out.validating, #out.mutating + 1, out.mutating)
  return out.mutating
end

function M.admit(env, input, path)
  local rv = review_of(env, input)
  local req = rv.request
  local paths = path and { path } or paths_for(env, type(req.kind) == "table" and req.kind or {})
  if #paths == 0 then
    error(guard.where() .. ("env:admit: no webhook of the scripts admits %s"):format(
      type(req.kind) == "table" and tostring(req.kind.group) .. "/" .. tostring(req.kind.version) .. "/"
      .. tostring(req.kind.kind) or "this request"), 0)
  end
  local result = { allowed = true, object = req.object, status = 200 }
  local all_ops
  for _, p in ipairs(paths) do
    local status, _, body = call(env, p, json.encode(rv))
    if status ~= 200 then
      result.allowed, result.status, result.error = nil, status, body
      return result
    end
    local answer = assert(json.decode(body)).response
    assert(answer.uid == req.uid, "the webhook answered another uid")
    for _, w in ipairs(answer.warnings or {}) do
      result.warnings = result.warnings or {}
      result.warnings[#result.warnings + 1] = w
    end
    if answer.patch then
      local ops = assert(json.decode(assert(base64.decode(answer.patch))))
      local patched, perr = patch.apply(result.object, ops)
      if not patched then error(guard.where() .. p .. "'s patch does not apply: " .. perr, 0) end
      result.object = patched
      all_ops = all_ops or {}
      table.move(ops, 1, #ops, #all_ops + 1, all_ops)
      rv = object.copy(rv)
      rv.request.object = patched
    end
    if not answer.allowed then
      local st = answer.status or {}
      result.allowed, result.message, result.code, result.reason = false, st.message, st.code, st.reason
      break
    end
  end
  result.patch = all_ops
  return result
end

function M.convert(env, obj, version)
  if type(obj) ~= "table" or type(obj.apiVersion) ~= "string" then
    error(guard.where() .. "env:convert(obj, version) needs an object", 0)
  end
  if type(version) ~= "string" then error(guard.where() .. "env:convert(obj, version) needs a version", 0) end
  local group = obj.apiVersion:match("^(.*)/[^/]*$") or ""
  local desired = version:find("/") and version or group .. "/" .. version
  uids = uids + 1
  local rv = { apiVersion = "apiextensions.k8s.io/v1", kind = "ConversionReview", request = {
    uid = ("00000000-0000-4000-9000-%012d"):format(uids), desiredAPIVersion = desired,
    objects = json.array { obj } } }
  local status, _, body = call(env, "/convert", json.encode(rv))
  if status ~= 200 then return nil, body end
  local answer = assert(json.decode(body)).response
  if answer.result.status ~= "Success" then return nil, answer.result.message end
  return answer.convertedObjects[1]
end

return M
