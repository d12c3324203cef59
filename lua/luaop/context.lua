-- luaop.context - the reconcile context, ctx: reads from the caches (copies,
-- so what a reconcile changes is not the cache's until written), the
-- client's writes, and a logger naming the object.
local luaop = require "luaop"
local events = require "luaop.events"
local kind_name = require("luaop.definition").kind_name

local M = {}

local Ctx = {}
Ctx.__index = Ctx

-- The informer cache that holds every object of `kind` the query asks for
-- (q.namespace, q.label_selector, q.field_selector), if one runs: one with
-- no namespace or the query's, and exactly the query's selectors. Else, for
-- the controller's own kind, its cache, selectors and all (what they leave
-- out reads as absent, as with controller-runtime's cache selectors).
function Ctx:cache(kind, q)
  local inf = self.manager:cache_for(kind, q or {})
  if inf then return inf end
  local p = self.controller and self.controller.primary
  if p and (p.kind == kind or (not kind:find("/", 1, true) and kind_name(p.kind) == kind)) then return p.inf end
  return nil
end

-- get(kind, req_or_name [, namespace]): from the cache when the kind is
-- watched (never yields), else from the API server. nil when gone.
function Ctx:get(kind, req, ns)
  local name = type(req) == "table" and req.name or req
  ns = type(req) == "table" and req.namespace or ns
  if ns == "" then ns = nil end
  local inf = self:cache(kind, { namespace = ns })
  if inf then
    -- a copy: what the reconcile changes is not the cache's until written
    if ns then return luaop.copy(inf:get(ns, name)) end
    return luaop.copy(inf:get(name))
  end
  return self.client:get(kind, name, ns)
end

-- list(kind [, opts]): cached objects (opts.namespace, opts.label_selector
-- and opts.field_selector choose the cache; opts.labels = {k = v} and
-- opts.filter = function(obj) filter it), or a LIST when no cache holds them.
function Ctx:list(kind, opts)
  opts = opts or {}
  local function keep(o)
    local md = o.metadata
    if opts.namespace and md.namespace ~= opts.namespace then return false end
    for k, v in pairs(opts.labels or {}) do
      if not md.labels or md.labels[k] ~= v then return false end
    end
    return not opts.filter or opts.filter(o)
  end
  local inf = self:cache(kind, opts)
  if inf then
    local out = inf:list(keep)
    for i, o in ipairs(out) do out[i] = luaop.copy(o) end
    return out
  end
  local list, err = self.client:list(kind, {
    namespace = opts.namespace, all_namespaces = opts.namespace == nil,
    label_selector = opts.label_selector, field_selector = opts.field_selector,
  })
  if not list then return nil, err end
  local out = {}
  for _, o in ipairs(list.items) do
    if keep(o) then out[#out + 1] = o end
  end
  return out
end

for _, verb in ipairs { "create", "update", "update_status", "patch", "apply", "delete" } do
  Ctx[verb] = function(self, ...) return self.client[verb](self.client, ...) end
end

-- event(obj, type, reason, note [, action]): an events.k8s.io/v1 Event
-- about obj, as `kubectl events` shows it: type "Normal" or "Warning", an
-- UpperCamelCase reason (and action, default "Reconcile"), a note of up to
-- 1 KiB. Repeats merge into a series and a flood is cut down
-- (luaop.events); never waits. Raises when the Event is not valid.
function Ctx:event(obj, type_, reason, note, action)
  local ok, err = events.record { regarding = obj, type = type_, reason = reason, note = note, action = action,
    controller = self.controller and self.controller.name }
  if not ok then error(err, 2) end
end

-- A context: fields manager, client, controller, log.
function M.new(fields)
  return setmetatable(fields, Ctx)
end

return M
