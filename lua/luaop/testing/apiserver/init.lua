-- luaop.testing.apiserver - an in-memory Kubernetes API server for the test kit
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
--   - no schema validation (a custom resource's unknown fields are pruned
--     by its CRD's schema: prune.lua); defaults, canonical quantities and
--     a new Pod's admission for the common built-in kinds only (defaults.lua;
--     docs/testing.md, "What the kit approximates");
--   - core v1 Events and events.k8s.io/v1 Events are stored apart;
--   - a dependent whose owner never existed is not collected (the real
--     collector deletes it once it has looked the owner up);
--   - the whole event history is kept (no compaction until
--     expire_watches), so memory grows with every change.
local core = require "luaop.core"
local encode, decode = core.json.encode, core.json.decode
local values_part = require "luaop.testing.apiserver.values"
local canonical, copy, drop_nulls, is_object, nonempty, same, view =
  values_part.canonical, values_part.copy, values_part.drop_nulls, values_part.is_object,
  values_part.nonempty, values_part.same, values_part.view
local status_part = require "luaop.testing.apiserver.status"
local MODIFIED, already_exists, conflict, expired, failure, field_error, forbidden, invalid_object,
  method_not_allowed, not_found, quote, resource_details, status_text =
  status_part.MODIFIED, status_part.already_exists, status_part.conflict, status_part.expired,
  status_part.failure, status_part.field_error, status_part.forbidden, status_part.invalid_object,
  status_part.method_not_allowed, status_part.not_found, status_part.quote, status_part.resource_details,
  status_part.status_text
local kinds_part = require "luaop.testing.apiserver.kinds"
local DEFAULT_NAMESPACES, split_path = kinds_part.DEFAULT_NAMESPACES, kinds_part.split_path
local store_part = require "luaop.testing.apiserver.store"
local crd_kinds, okey = store_part.crd_kinds, store_part.okey

local M = {}

local Server = {}
Server.__index = Server
-- the methods of its parts
local verbs_part = require "luaop.testing.apiserver.verbs"
local deletes_part = require "luaop.testing.apiserver.deletes"
local watches_part = require "luaop.testing.apiserver.watches"
for _, part in ipairs { kinds_part, store_part, verbs_part, deletes_part, watches_part } do
  for name, f in pairs(part.methods) do Server[name] = f end
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
  local names = k.names
  if not names then -- (made once a kind record: the built-in ones are every server's)
    names = { [k.kind] = true, [k.resource] = true, [k.resource .. "." .. k.group] = true,
      [k.gv .. "/" .. k.kind] = true, [k.gv .. "/" .. k.resource] = true }
    for _, short in ipairs(k.short_names or {}) do names[short] = true end
    k.names = names
  end
  return names[spec] == true
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
  -- what was sent: its text kept, decoded when the log is read (Server:_full)
  local body, sent = r.decoded, nil
  if r.verb == "create" then
    sent = "object"
    local md = is_object(body) and is_object(body.metadata) and body.metadata or {}
    if nonempty(md.name) then e.name = md.name end
  elseif r.verb == "update" then
    sent = "object"
  elseif r.verb == "patch" then
    sent = "patch"
    e.patch_type = r.ctype and r.ctype:match("^[^;]*")
  elseif r.verb == "delete" or r.verb == "deletecollection" then
    sent = "options"
  end
  if sent and body ~= nil then self.texts[e] = { sent, r.body } end
  if r.verb == "list" or r.verb == "watch" or r.verb == "deletecollection" then
    e.label_selector = nonempty(r.query.labelSelector) and r.query.labelSelector or nil
    e.field_selector = nonempty(r.query.fieldSelector) and r.query.fieldSelector or nil
  end
  if r.verb == "watch" then e.resource_version = r.query.resourceVersion end
  self.log[#self.log + 1] = e
  return e
end

-- Serve one request (see the header): HTTP status, response body (JSON).
function Server:request(method, path, body, content_type, accept)
  if type(method) ~= "string" then error("request needs a method", 2) end
  if type(path) ~= "string" or path:sub(1, 1) ~= "/" then error("request needs a path that starts with /", 2) end
  local segs, query = split_path(path)
  local r, err = self:_route(segs)
  if not r then return err.code, status_text(err) end
  if r.discovery then
    if method ~= "GET" then return 405, status_text(method_not_allowed()) end
    return 200, type(r.discovery) == "string" and r.discovery or encode(r.discovery)
  end
  r.query, r.body, r.ctype = query, body, content_type
  r.verb = verb_of(method, r)
  if not r.verb or not (r.sub or r.k.verb_set[r.verb]) then return 405, status_text(method_not_allowed()) end
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
  if (r.verb == "get" or r.verb == "list") and values_part.wants_partial(accept) then res = values_part.partial(res) end
  e.code = code
  -- create and update log what was sent, and what came back beside it
  -- (the answer's text too, decoded when the log is read)
  local text = encode(res)
  local texts = self.texts[e] or {}
  self.texts[e] = texts
  texts[#texts + 1], texts[#texts + 2] = (r.verb == "create" or r.verb == "update") and "result" or "object", text
  return code, text
end

-- ---- for tests -------------------------------------------------------------------------------

-- The kind a name means (see names_kind); raises when none.
function Server:_kind(spec)
  if type(spec) ~= "string" then error("a kind or resource name is required", 3) end
  local memo = self.kind_memo -- (kinds.lua's _kinds_changed)
  if memo and memo[spec] then return memo[spec] end
  for _, gvname in ipairs(self:_gv_order()) do
    local gv = self.gvs[gvname]
    for _, res in ipairs(gv.order) do
      if names_kind(spec, gv.kinds[res]) then
        if memo then memo[spec] = gv.kinds[res] end
        return gv.kinds[res]
      end
    end
  end
  local _, message = self:resolve_kind(spec)
  error(message, 3)
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
  local derr = require("luaop.testing.apiserver.defaults").apply(self, k, obj, "update", omd.namespace)
  if derr then error("seed: " .. derr.message, 3) end
  obj.apiVersion = old.apiVersion
  if same(obj, old) then return old end
  return self:_write(k, old, obj)
end

-- Put an object in as a create would (name from generateName, uid,
-- resourceVersion, creationTimestamp, generation; its namespace made when
-- missing), keeping its status; no action is logged. An object that
-- exists is replaced. Returns it (a copy).
-- (unwanted: nothing returned, no copy made; obj may be its JSON text)
function Server:seed(obj, unwanted)
  local nulls
  obj, nulls = canonical(obj)
  if not is_object(obj) or not nonempty(obj.apiVersion) or not nonempty(obj.kind) then
    error("seed needs an object with apiVersion and kind", 2)
  end
  local gv = self.gvs[obj.apiVersion]
  local k
  for _, res in ipairs(gv and gv.order or {}) do
    if gv.kinds[res].kind == obj.kind then k = gv.kinds[res] end
  end
  if not k then error(("seed: the server serves no %s %s"):format(obj.apiVersion, obj.kind), 2) end
  if nulls then drop_nulls(obj) end
  if not is_object(obj.metadata) then obj.metadata = {} end
  local ns = k.namespaced and (nonempty(obj.metadata.namespace) and obj.metadata.namespace or "default") or nil
  local old = nonempty(obj.metadata.name) and self:_find(k, ns, obj.metadata.name)
  if old then
    obj.metadata.namespace = ns
    local res = self:_reseed(k, old, obj)
    if unwanted then return end
    return copy(view(k, res))
  end
  local code, res = self:_create_object(k, ns, obj, false, true)
  if not code then error("seed: " .. res.message, 2) end
  if unwanted then return end
  return copy(view(k, res))
end

-- Serve a CRD (an apiextensions.k8s.io/v1 CustomResourceDefinition): each
-- served version's kind, with /status where the version has it; the CRD
-- itself is stored as well (again: its kinds are updated).
function Server:add_crd(crd, unwanted)
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
  if not old then return self:seed(crd, unwanted) end
  local new = copy(old)
  new.spec = crd.spec
  self:_serve_crd(new, kinds)
  if not same(new, old) then self:_write(self.crd_kind, old, new) end
  if unwanted then return end
  return copy(self:_find(self.crd_kind, nil, crd.metadata.name))
end

-- The action log from entry `first` (default 1) on: copies of {seq, verb,
-- resource, group, version, kind, namespace, name, subresource, object,
-- patch, patch_type, options, label_selector, field_selector,
-- resource_version, dry_run, field_manager, code, reason, injected}.
-- keep(i, action): which to copy (default all).
function Server:actions(first, keep)
  local out = {}
  for i = first or 1, #self.log do
    if not keep or keep(i, self.log[i]) then out[#out + 1] = copy(self:_full(self.log[i])) end
  end
  return out
end

-- The last action (a copy) | nil.
function Server:last_action()
  return copy(self:_full(self.log[#self.log]))
end

-- Entry e with what was sent and answered decoded from their texts, kept
-- by the log until it is read (a copy of every body and answer cost the
-- kit more than its JSON).
function Server:_full(e)
  local texts = e and self.texts[e]
  if texts then
    self.texts[e] = nil
    for i = 1, #texts, 2 do e[texts[i]] = (decode(texts[i + 1])) end
  end
  return e
end

function Server:clear_actions()
  self.log, self.texts = {}, {}
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
    rv = 0, oldest = 0, events = {}, watches = {}, holds = {}, log = {}, texts = {}, seq = 0, rules = {},
    gvs = {}, groups = {}, group_order = {}, stores = {}, store_kind = {}, uids = {},
  }, Server)
  -- a kind's store is made when first used: most kinds are never used
  setmetatable(s.stores, { __index = function(stores, key)
    if not s.store_kind[key] then return nil end
    local st = {}
    stores[key] = st
    return st
  end })
  s:_add_builtin()
  s.ns_kind = s.gvs.v1.kinds.namespaces
  s.crd_kind = s.gvs["apiextensions.k8s.io/v1"].kinds.customresourcedefinitions
  for _, name in ipairs(DEFAULT_NAMESPACES) do
    s:_create_object(s.ns_kind, nil, { apiVersion = "v1", kind = "Namespace", metadata = { name = name } }, false, true)
  end
  return s
end

M.REASON_CODES = REASON_CODES -- (luaop.testing.checks: the reasons env:fail knows)
return M
