-- luaop.context - the reconcile context, ctx: reads from the caches (fresh
-- objects, so what a reconcile changes is not the cache's until written), the
-- client's writes, and a logger naming the object.
local client = require "luaop.client"
local events = require "luaop.events"
local definition = require "luaop.definition"
local discovery = require "luaop.discovery"
local arguments = require "luaop.arguments"
local kind_name = definition.kind_name
local misuse, target, list_options, bad_object = arguments.misuse, arguments.target, arguments.list_options,
  arguments.bad_object

local M = {}

-- The methods of every ctx. Its shared metatable holds only the method
-- table, which holds only functions: indexing a ctx yields a method, never
-- a table of luaop's (with Ctx.__index = Ctx, a script that changed
-- ctx.__index changed every script's ctx).
local Ctx = {}
local ctx_mt = { __index = Ctx, __metatable = false }

-- What a context works with (the manager, the shared client, the
-- controller), out of the script's reach: ctx holds only ctx.log, so no
-- script reaches another's caches, controllers or client through it.
local private = setmetatable({}, { __mode = "k" })

-- Whether kind, as a script writes it, is the kind of informer entry e.
local function kind_of(e, kind)
  return e.kind == kind or (not kind:find("/", 1, true) and kind_name(e.kind) == kind)
end

-- The informer cache that holds every object of `kind` the query asks for
-- (q.namespace, q.label_selector, q.field_selector), if one runs: one with
-- no namespace or the query's, and exactly the query's selectors (of
-- several, one the controller subscribes to: Manager:cache_for). Else, for
-- the controller's own kind, its cache, selectors and all (what they leave
-- out reads as absent, as with controller-runtime's cache selectors).
-- (Private: the informer is every watching controller's, other scripts'.)
local function cache(self, kind, q)
  local inf = private[self].manager:cache_for(kind, q or {}, private[self].controller)
  if inf then return inf end
  local p = private[self].controller and private[self].controller.primary
  if p and kind_of(p, kind) then return p.inf end
  return nil
end

-- A reconcile's own object (the one its request names, of the
-- controller's kind) comes from the controller's own cache, the one whose
-- events queue it, even where another cache holds the kind (one without
-- the selector, for `owns` of the same kind; another controller's): each
-- runs on a watch of its own, not in step with this one, and may not have
-- seen the event that queued the reconcile yet. The object not there yet
-- read as absent would end the reconcile as done, and the other cache's
-- event of it queues nothing: it would never be reconciled. So: what the
-- controller's cache says, or what a cache this process writes to holds of
-- that same object newer (read your own writes, which a cache with a
-- selector only learns from its watch); absent when the controller's cache
-- does not have it (gone, or out of its selector: its event queued this).
-- false: not the reconcile's own object.
local function own_object(self, kind, ns, name)
  local p = private[self]
  local e = p.controller and p.controller.primary
  if not p.request or not e or type(name) ~= "string" or not kind_of(e, kind) then return false end
  local k = ns and ns .. "/" .. name or name
  if k ~= p.request then return false end
  local obj = e.inf:object(k)
  if obj == nil then return nil end
  for _, inf in ipairs(p.manager:caches_of(kind, ns)) do
    -- (a metadata-only or trimmed cache's copy, newer or not, is no whole
    -- object: such a cache has a cut)
    if inf ~= e.inf and not inf.cut and not e.inf.cut then
      local newer = inf:newer(k, obj)
      if newer == "deleted" then return nil end
      obj = newer or obj
    end
  end
  return obj
end

-- What a read no cache answers says in code that must not wait (a watch's
-- map, a handler), where it cannot ask the API server: the kind, whether
-- it is served as far as luaop knows (the built-in kinds of the Kubernetes
-- version it targets, and what discovery has seen) with the nearest kind
-- that is, and what to do instead.
local function uncached(self, form, kind)
  local r, seen = private[self].client:resolve_seen(kind)
  local parts = select(2, kind:gsub("/", "/")) + 1
  local served = r ~= nil
  local candidates, has = {}, {}
  local function add(group, version, k)
    local gv = group == "" and version or group .. "/" .. version
    local spec = parts == 1 and k or parts == 2 and group == "" and gv .. "/" .. k or parts == 3 and group ~= ""
      and gv .. "/" .. k or nil
    if spec == kind then served = true end
    if spec and not has[spec] then
      has[spec] = true
      candidates[#candidates + 1] = spec
    end
  end
  for _, b in ipairs(discovery.resources) do add(b.group, b.version, b.kind) end
  for _, s in ipairs(seen or {}) do
    local g, v, k = s:match("^(.-)/?([^/]+)/([^/]+)$")
    add(g, v, k)
  end
  local why = "a watch map or a handler must not wait, so it cannot ask the API server"
  if served then
    return ("%s: no cache holds kind %s, and %s: read it in a reconcile, or watch the kind (owns, watches) to have "
      .. "a cache of it"):format(form, kind, why)
  end
  local near = definition.nearest(kind, candidates)
  return ("%s: kind %s is not served as far as luaop knows%s: it is none of Kubernetes %s's kinds or those "
    .. "discovery found, and no cache holds it; %s"):format(form, kind,
    near and (" (did you mean %s?)"):format(near) or "", discovery.kubernetes, why)
end

-- After a ctx method's client call: a kind the API server has no resource
-- for raised at the script's line, with the nearest kind served (as a
-- NotFound, `if not obj then return end` would take a typo for a deletion).
local function no_such_kind(self, form, kind, err)
  local m = type(err) == "table" and rawget(err, "code") == 404 and rawget(err, "message")
  if type(m) ~= "string" or not m:find("^the server has no resource for kind") then return end
  local near = uncached(self, form, kind):match(" %(did you mean [^)]+%?%)")
  error(("%s: %s%s: a kind the API server serves is needed"):format(form, m, near or ""), 3)
end

-- The NotFound a cache read answers with, as the API server words it.
local function not_found(kind, name)
  return client.error(404, { kind = "Status", reason = "NotFound",
    message = ("%s %q not found"):format(kind_name(kind), tostring(name)) })
end

-- What the caches say of kind ns/name (ns nil: a cluster-scoped name):
-- the object or nil, and whether a cache answered at all.
local function cached(self, kind, ns, name)
  local own = own_object(self, kind, ns, name)
  if own ~= false then return own, true end
  local inf = cache(self, kind, { namespace = ns })
  if not inf then return nil, false end
  if ns then return inf:get(ns, name), true end
  return inf:get(name), true
end

-- get(kind, req_or_name [, namespace]) -> obj | nil, err: from the cache
-- when the kind is watched (never yields), else from the API server. Gone
-- is nil and an error whose reason is NotFound either way. No namespace
-- said: a cluster-scoped kind's object, else the one in the client's
-- namespace (where create puts an object that names none, and where a GET
-- looks), cached or not: never the request's.
function Ctx:get(kind, req, ns)
  local name
  name, ns = target("ctx:get(kind, name_or_req [, namespace])", kind, req, ns)
  if not name then error(ns, 2) end
  local obj, answered = cached(self, kind, ns, name)
  local dns = private[self].client.namespace
  if obj == nil and ns == nil and type(dns) == "string" then
    -- (a cluster-scoped object's key has no namespace, a namespaced one's
    -- always has: one of the two reads finds nothing for either scope)
    local o, a = cached(self, kind, dns, name)
    obj, answered = o, answered or a
  end
  -- (a cache's read is a fresh object: what the reconcile changes is not
  -- the cache's until written)
  if obj ~= nil then return obj end
  if answered then return nil, not_found(kind, name) end
  if not coroutine.isyieldable() then error(uncached(self, "ctx:get(kind, name_or_req [, namespace])", kind), 2) end
  local o, err = private[self].client:get(kind, name, ns)
  no_such_kind(self, "ctx:get(kind, name_or_req [, namespace])", kind, err)
  return o, err
end

-- list(kind [, opts]): cached objects (opts.namespace, opts.label_selector
-- and opts.field_selector choose the cache; opts.labels = {k = v} and
-- opts.filter = function(obj) filter it), or a LIST when no cache holds them.
-- No namespace: every namespace's, cached or not (controller-runtime's List).
function Ctx:list(kind, opts)
  local bad
  opts, bad = list_options(kind, opts)
  if not opts then error(bad, 2) end
  -- (a cache's objects are fresh: the reconcile's to keep or change)
  local function selected(o)
    local md = o.metadata
    if opts.namespace and md.namespace ~= opts.namespace then return false end
    for k, v in pairs(opts.labels or {}) do
      if not md.labels or md.labels[k] ~= v then return false end
    end
    return true
  end
  local items
  local inf = cache(self, kind, opts)
  if inf then
    items = inf:list(selected, { namespace = opts.namespace, labels = opts.labels,
      holder = private[self].controller }) -- a label index it asks for is held on its script's behalf
  else
    if not coroutine.isyieldable() then error(uncached(self, "ctx:list(kind [, opts])", kind), 2) end
    local list, err = private[self].client:list(kind, {
      namespace = opts.namespace, all_namespaces = opts.namespace == nil,
      label_selector = opts.label_selector, field_selector = opts.field_selector,
    })
    no_such_kind(self, "ctx:list(kind [, opts])", kind, err)
    if not list then return nil, err end
    items = {}
    for _, o in ipairs(list.items) do
      if selected(o) then items[#items + 1] = o end
    end
  end
  if not opts.filter then return items end
  local out = {}
  for _, o in ipairs(items) do
    if opts.filter(o) then out[#out + 1] = o end
  end
  return out
end

-- Writes. What the API server answers is put in the caches at once (read
-- your own writes, as client-go's MutationCache): the next reconcile sees
-- the object this one created, changed or deleted even before its watch
-- event, so a controller needs no expectations of its own.
local function written(self, kind, obj)
  if type(obj) == "table" and obj.metadata then private[self].manager:observe(kind, obj) end
  return obj
end

function Ctx:create(obj, opts)
  local bad = bad_object("create", obj, opts)
  if bad then error(bad, 2) end
  local res, err = private[self].client:create(obj, opts)
  no_such_kind(self, "ctx:create(obj [, opts])", obj.apiVersion .. "/" .. obj.kind, err)
  if not res then return nil, err end
  if opts and opts.dry_run then return res end -- nothing was written
  return written(self, obj.apiVersion .. "/" .. obj.kind, res)
end

for _, verb in ipairs { "update", "update_status", "apply" } do
  Ctx[verb] = function(self, obj, opts)
    local bad = bad_object(verb, obj, opts)
    if bad then error(bad, 2) end
    local res, err = private[self].client[verb](private[self].client, obj, opts)
    no_such_kind(self, ("ctx:%s(obj [, opts])"):format(verb), obj.apiVersion .. "/" .. obj.kind, err)
    if not res then return nil, err end
    return written(self, obj.apiVersion .. "/" .. obj.kind, res)
  end
end

-- opts with the namespace ns (nil: opts itself), for the client.
local function in_namespace(opts, ns)
  if ns == nil then return opts end
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  o.namespace = ns
  return o
end

-- patch(kind, name_or_req [, namespace], patch [, opts]): the patch a
-- table, or its JSON text (which starts with { or [, as no namespace can).
function Ctx:patch(kind, req, ns, patch, opts)
  local form = "ctx:patch(kind, name_or_req [, namespace], patch [, opts])"
  if type(ns) ~= "string" or ns:match("^%s*[%[{]") then ns, patch, opts = nil, ns, patch end
  local name
  name, ns = target(form, kind, req, ns, opts)
  if not name then error(ns, 2) end
  if type(patch) ~= "table" and type(patch) ~= "string" then
    error(misuse(form, "patch must be a table (or its JSON text)", patch), 2)
  end
  local t = opts and opts.type
  if t ~= nil and t ~= "merge" and t ~= "json" and t ~= "strategic" then
    error(misuse(form, 'opts.type must be "merge", "json" or "strategic"', t), 2)
  end
  local res, err = private[self].client:patch(kind, name, patch, in_namespace(opts, ns))
  no_such_kind(self, form, kind, err)
  if not res then return nil, err end
  return written(self, kind, res)
end

-- delete(obj [, opts]) deletes exactly that object: preconditions on its
-- uid and resourceVersion (a Conflict when it changed or was replaced
-- since it was read); one already gone is deleted (true). Or
-- delete(kind, name_or_req [, namespace] [, opts]), as the client's (no
-- namespace said: as ctx:get, the client's for a namespaced kind).
function Ctx:delete(kind, req, ns, opts)
  local name
  if type(kind) == "table" then
    local obj = kind
    if ns ~= nil then error("ctx:delete(obj [, opts]): the object names its namespace: no third argument", 2) end
    opts = req or {}
    if type(opts) ~= "table" then error(misuse("ctx:delete(obj [, opts])", "opts must be a table", opts), 2) end
    if type(obj.metadata) ~= "table" or type(obj.kind) ~= "string" or type(obj.apiVersion) ~= "string" then
      error("delete(obj) needs an object with apiVersion, kind and metadata", 2)
    end
    local bad = client.bad_object_kind(obj)
    if bad then error("ctx:delete(obj [, opts]): " .. bad, 2) end
    local md = obj.metadata
    kind, ns, name = obj.apiVersion .. "/" .. obj.kind, md.namespace, md.name
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.preconditions = o.preconditions or { uid = md.uid, resourceVersion = md.resourceVersion }
    local res, err = private[self].client:delete(kind, { namespace = ns, name = name }, o)
    no_such_kind(self, "ctx:delete(obj [, opts])", kind, err)
    if not res then
      -- gone already: the API server's NotFound for this object (one for
      -- a kind it does not serve, a typo in apiVersion, is no such answer)
      local d = err.reason == "NotFound" and type(err.details) == "table" and err.details
      if d and d.name == name then
        private[self].manager:observe_delete(kind, ns, name, md.uid)
        return true
      end
      return nil, err
    end
    private[self].manager:observe_delete(kind, ns, name, md.uid, res)
    return res
  end
  if type(ns) == "table" and opts == nil then ns, opts = nil, ns end
  name, ns = target("ctx:delete(kind, name_or_req [, namespace] [, opts])", kind, req, ns, opts)
  if not name then error(ns, 2) end
  local c = private[self].client
  local res, err = c:delete(kind, name, in_namespace(opts, ns))
  no_such_kind(self, "ctx:delete(kind, name_or_req [, namespace] [, opts])", kind, err)
  if not res then return nil, err end
  if ns == nil then -- the namespace the client deleted in (its kind resolved: that never waits now)
    local r = c:resolve(kind)
    ns = r and c:namespace_of(r, nil) or nil
  end
  -- the uid of what went: the object answered, or the Status's details
  local uid = type(res) == "table" and (type(res.metadata) == "table" and res.metadata.uid
    or type(res.details) == "table" and res.details.uid) or nil
  private[self].manager:observe_delete(kind, ns, name, uid, res)
  return res
end

-- event(obj, type, reason, note [, action]): an events.k8s.io/v1 Event
-- about obj, as `kubectl events` shows it: type "Normal" or "Warning", an
-- UpperCamelCase reason (and action, default "Reconcile"), a note of up to
-- 1 KiB. Repeats merge into a series and a flood is cut down
-- (luaop.events); never waits. Raises when the Event is not valid.
-- What is wrong with ctx:event's arguments (a list, n of them), or nil;
-- only those known[i] says are known are checked (luaop --check knows the
-- constant ones; a call knows them all). Kubernetes' rules for an
-- events.k8s.io/v1 Event, said at the script's line.
local EVENT_FORM = "ctx:event(obj, type, reason, note [, action])"
local function severity(v) return v == "Normal" or v == "Warning" end
local function word(v) return type(v) == "string" and v:match("^%u%w*$") ~= nil and #v <= 128 end
local function bad_event(args, n, known)
  local form = EVENT_FORM
  local obj, type_, reason, note, action = args[1], args[2], args[3], args[4], args[5]
  if known[1] and type(obj) ~= "table" then
    return misuse(form, "obj must be the object the Event is about (a table)", obj)
      .. (severity(obj) and ": the object comes first, then the type" or "")
  end
  if known[1] and (type(obj.apiVersion) ~= "string" or type(obj.kind) ~= "string" or type(obj.metadata) ~= "table"
      or type(obj.metadata.name) ~= "string") then
    return misuse(form, "obj must be the object the Event is about, with apiVersion, kind and metadata.name", obj)
  end
  if known[2] and not severity(type_) then
    local swapped = known[3] and severity(reason) and word(type_)
    return misuse(form, 'type must be "Normal" or "Warning"', type_)
      .. (swapped and (": type and reason swapped? (ctx:event(obj, %q, %q, ...))"):format(reason, type_) or "")
  end
  if known[3] and not word(reason) then
    return misuse(form, 'reason must be one UpperCamelCase word of at most 128 characters, as Kubernetes requires '
      .. '(such as "PodCreated")', reason)
  end
  if known[4] and note ~= nil and type(note) ~= "string" then
    return misuse(form, "note must be a string (at most 1 KiB is kept)", note)
  end
  if known[5] and action ~= nil and not word(action) then
    return misuse(form, 'action must be one UpperCamelCase word of at most 128 characters (such as "Create"; '
      .. 'default "Reconcile")', action)
  end
  if n > 5 then return ("%s: takes at most 5 arguments, got %d"):format(form, n) end
end
M.bad_event = bad_event

function Ctx:event(...)
  local obj, type_, reason, note, action = ...
  local n = select("#", ...)
  local bad = bad_event({ obj, type_, reason, note, action }, n, { true, true, true, true, true })
  if bad then error(bad, 2) end
  local c = private[self].controller
  local ok, err = events.record { regarding = obj, type = type_, reason = reason, note = note, action = action,
    controller = c and c.name, script = c and c.script, stopped = c and c.stopped }
  if not ok then error(EVENT_FORM .. ": " .. err, 2) end
end

-- The names of ctx's methods, sorted (luaop --check's "did you mean").
function M.method_names()
  local out = {}
  for k in pairs(Ctx) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- A context: fields manager, client, controller, request (the key a
-- reconcile runs for; kept private), log.
function M.new(fields)
  local ctx = setmetatable({ log = fields.log }, ctx_mt)
  private[ctx] = fields
  return ctx
end

return M
