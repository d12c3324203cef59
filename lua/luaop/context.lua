-- luaop.context - the reconcile context, ctx: reads from the caches (copies,
-- so what a reconcile changes is not the cache's until written), the
-- client's writes, and a logger naming the object.
local copy = require("luaop.object").copy
local client = require "luaop.client"
local events = require "luaop.events"
local kind_name = require("luaop.definition").kind_name

local M = {}

-- The methods of every ctx. Its metatable is shared and holds only the
-- method table, which holds only functions: indexing a ctx yields a method,
-- never a table of luaop's (with Ctx.__index = Ctx, ctx.__index was Ctx
-- itself, and a script that changed it changed every script's ctx).
local Ctx = {}
local ctx_mt = { __index = Ctx, __metatable = false }

-- What a context works with (the manager, the shared client, the
-- controller) is kept here, out of the script's reach: ctx itself holds
-- only ctx.log, so a script cannot reach another's caches, controllers or
-- client through it.
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
-- (Private: the informer is shared with every controller that watches its
-- kind, other scripts' among them, so it never reaches a script.)
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
  local obj = e.inf.store[k]
  if obj == nil then return nil end
  for _, inf in ipairs(p.manager:caches_of(kind, ns)) do
    if inf ~= e.inf then
      local newer = inf:newer(k, obj)
      if newer == "deleted" then return nil end
      obj = newer or obj
    end
  end
  return obj
end

-- The NotFound a cache read answers with, as the API server words it.
local function not_found(kind, name)
  return client.error(404, { kind = "Status", reason = "NotFound",
    message = ("%s %q not found"):format(kind_name(kind), tostring(name)) })
end

-- get(kind, req_or_name [, namespace]) -> obj | nil, err: from the cache
-- when the kind is watched (never yields), else from the API server. Gone
-- is nil and an error whose reason is NotFound either way.
function Ctx:get(kind, req, ns)
  local name = type(req) == "table" and req.name or req
  ns = type(req) == "table" and req.namespace or ns
  if ns == "" then ns = nil end
  local own = own_object(self, kind, ns, name)
  if own ~= false then
    if own == nil then return nil, not_found(kind, name) end
    return copy(own)
  end
  local inf = cache(self, kind, { namespace = ns })
  if inf then
    -- a copy: what the reconcile changes is not the cache's until written
    local obj = ns and inf:get(ns, name) or (not ns and inf:get(name)) or nil
    if obj == nil then return nil, not_found(kind, name) end
    return copy(obj)
  end
  return private[self].client:get(kind, name, ns)
end

-- list(kind [, opts]): cached objects (opts.namespace, opts.label_selector
-- and opts.field_selector choose the cache; opts.labels = {k = v} and
-- opts.filter = function(obj) filter it), or a LIST when no cache holds them.
function Ctx:list(kind, opts)
  opts = opts or {}
  -- (read only: o may be the cache's own; the script's filter gets copies)
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
    for i, o in ipairs(items) do items[i] = copy(o) end
  else
    local list, err = private[self].client:list(kind, {
      namespace = opts.namespace, all_namespaces = opts.namespace == nil,
      label_selector = opts.label_selector, field_selector = opts.field_selector,
    })
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
  local res, err = private[self].client:create(obj, opts)
  if not res then return nil, err end
  if opts and opts.dry_run then return res end -- nothing was written
  return written(self, obj.apiVersion .. "/" .. obj.kind, res)
end

for _, verb in ipairs { "update", "update_status", "apply" } do
  Ctx[verb] = function(self, obj, opts)
    local res, err = private[self].client[verb](private[self].client, obj, opts)
    if not res then return nil, err end
    return written(self, obj.apiVersion .. "/" .. obj.kind, res)
  end
end

function Ctx:patch(kind, req, patch, opts)
  local res, err = private[self].client:patch(kind, req, patch, opts)
  if not res then return nil, err end
  return written(self, kind, res)
end

-- delete(obj [, opts]) deletes exactly that object: preconditions on its
-- uid and resourceVersion (a Conflict when it changed or was replaced
-- since it was read); one already gone is deleted (true). Or
-- delete(kind, name_or_req [, opts]), as the client's.
function Ctx:delete(kind, req, opts)
  local ns, name
  if type(kind) == "table" then
    local obj = kind
    opts = req or {}
    if type(obj.metadata) ~= "table" or type(obj.kind) ~= "string" or type(obj.apiVersion) ~= "string" then
      error("delete(obj) needs an object with apiVersion, kind and metadata", 2)
    end
    local md = obj.metadata
    kind, ns, name = obj.apiVersion .. "/" .. obj.kind, md.namespace, md.name
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.preconditions = o.preconditions or { uid = md.uid, resourceVersion = md.resourceVersion }
    local res, err = private[self].client:delete(kind, { namespace = ns, name = name }, o)
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
  local res, err = private[self].client:delete(kind, req, opts)
  if not res then return nil, err end
  if type(req) == "table" then ns, name = req.namespace, req.name else ns, name = opts and opts.namespace, req end
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
function Ctx:event(obj, type_, reason, note, action)
  local c = private[self].controller
  local ok, err = events.record { regarding = obj, type = type_, reason = reason, note = note, action = action,
    controller = c and c.name, script = c and c.script, stopped = c and c.stopped }
  if not ok then error(err, 2) end
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
