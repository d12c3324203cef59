-- luaop.manager.caches - a manager's shared informers: one per kind, namespace
-- and selectors, fed to every controller subscribed to it; which caches hold
-- a kind in a namespace (for a reconcile's reads), and what this process
-- wrote, into them at once. Its methods are the manager's (luaop.manager).
local informer = require "luaop.informer"
local error_text = require("luaop.client").error_text
local kind_name = require("luaop.definition").kind_name

local M = {}
local Manager = {} -- methods of a manager

-- A trim ({drop = {paths}} or {keep = {paths}}) as one string: the same
-- for the same paths in any order ("" for none).
local function trim_id(trim)
  if type(trim) ~= "table" then return "" end
  local mode = trim.keep and "keep" or "drop"
  local paths = {}
  for i, p in ipairs(trim[mode] or {}) do paths[i] = tostring(p) end
  table.sort(paths)
  return mode .. ":" .. table.concat(paths, ",")
end

-- (owner: the kinds whose scope decides whether a sharded informer stays
-- sharded, luaop.informer.shard.attach)
local function informer_id(kind, namespace, selector, fields, sharded, owner, metadata_only, trim)
  return table.concat({ kind, namespace or "", selector or "", fields or "",
    sharded and "sharded:" .. table.concat(owner or {}, ",") or "", metadata_only and "metadata" or "",
    trim_id(trim) }, "|")
end

-- The informer entry for kind + namespace + selector, made (not started)
-- when there is none. One informer feeds every controller subscribed to it.
function Manager:entry(kind, opts)
  opts = opts or {}
  local sharded = opts.sharded and self.shard ~= nil
  local metadata_only = opts.metadata_only == true
  local id = informer_id(kind, opts.namespace, opts.label_selector, opts.field_selector, sharded, opts.owner,
    metadata_only, opts.trim)
  local e = self.informers[id]
  if not e then
    e = {
      id = id, kind = kind, namespace = opts.namespace, label_selector = opts.label_selector,
      field_selector = opts.field_selector, subs = {}, sharded = sharded,
      partial = metadata_only and 2 or opts.trim and 1 or 0, -- what reads rank it by
    }
    e.inf = informer.new(kind, {
      namespace = opts.namespace, label_selector = opts.label_selector, field_selector = opts.field_selector,
      metadata_only = metadata_only, trim = opts.trim, client = self.client,
    })
    -- sharded (luaop.shard): only the namespaces of the ranges it holds
    if sharded then self.shard:attach(e.inf, opts.owner) end
    local function dispatch(event)
      return function(a, b)
        for _, sub in ipairs(e.subs) do
          local f = sub[event]
          if f then
            local ok, err = pcall(f, a, b)
            if not ok then sub.log:error("event handler failed", { event = event, error = error_text(err) }) end
          end
        end
      end
    end
    e.inf:on { add = dispatch("add"), update = dispatch("update"), delete = dispatch("delete"),
      -- (what of an event's objects is decoded: what its subscribers read)
      reads = function() return informer.most_read(e.subs) end }
    e.inf.on_state = function() self:update_ready() end
    self.informers[id] = e
  end
  return e
end

-- Compatibility: the informer itself.
function Manager:informer(kind, opts)
  return self:entry(kind, opts).inf
end

-- The cache that holds every object of kind a read asks for (q.namespace,
-- q.label_selector, q.field_selector): one with no namespace or the
-- query's, and exactly the query's selectors; nil when none runs. Of
-- several, one that controller c (when given) subscribes to: its events
-- are the ones that queue c's reconciles, and another informer's watch is
-- not in step with it (a child deleted, its owner queued, and the read
-- finding the child still there in another controller's cache that has
-- not seen the delete yet: nothing would queue the owner again). A cache
-- of whole objects before a trimmed one, and that before a metadata-only
-- one (whose objects are PartialObjectMetadata), whichever c subscribes to.
function Manager:cache_for(kind, q, c)
  for partial = 0, 2 do
    local inf = self:cache_for_of(kind, q, c, partial)
    if inf then return inf end
  end
end

-- cache_for among the caches of one rank (entry.partial).
function Manager:cache_for_of(kind, q, c, partial)
  local found
  for _, e in ipairs(self.by_kind[kind_name(kind)] or {}) do
    if (e.kind == kind or not kind:find("/", 1, true))
      and (e.namespace == nil or e.namespace == q.namespace)
      and e.label_selector == q.label_selector and e.field_selector == q.field_selector
      and e.partial == partial
      -- (a sharded cache holds a namespace only when in its ranges)
      and (not e.inf.keep or (q.namespace and e.inf.keep { metadata = { namespace = q.namespace } })) then
      if c == nil then return e.inf end
      for _, sub in ipairs(c.subs or {}) do
        if sub.entry == e then return e.inf end
      end
      found = found or e.inf
    end
  end
  return found
end

-- Whether two kinds as scripts write them ("Switch", "v1/Pod",
-- "group/version/Kind") can name the same kind: the same name, and the
-- same group where both say it.
local function group_of(spec) -- "" for core ("v1/Pod"), nil when not said ("Pod")
  local parts = select(2, spec:gsub("/", "/"))
  if parts == 0 then return nil end
  return parts == 1 and "" or spec:match("^(.*)/[^/]*/[^/]*$")
end

local function same_kind(a, b)
  if kind_name(a) ~= kind_name(b) then return false end
  local ga, gb = group_of(a), group_of(b)
  return ga == nil or gb == nil or ga == gb
end

-- The caches that hold every object of kind in namespace ns: an informer
-- without selectors (what a selector keeps is left to its watch).
function Manager:caches_of(kind, ns)
  local out = {}
  for _, e in ipairs(self.by_kind[kind_name(kind)] or {}) do
    if same_kind(e.kind, kind) and not e.label_selector and not e.field_selector
      and (e.namespace == nil or e.namespace == ns) then
      out[#out + 1] = e.inf
    end
  end
  return out
end

-- A write of this process succeeded: its answer goes into the caches at
-- once (read your own writes), unless they hold something newer.
function Manager:observe(kind, obj)
  for _, inf in ipairs(self:caches_of(kind, obj.metadata.namespace)) do inf:observe(obj) end
end

-- A delete of this process succeeded (res: the server's answer).
function Manager:observe_delete(kind, ns, name, uid, res)
  for _, inf in ipairs(self:caches_of(kind, ns)) do inf:observe_delete(ns, name, uid, res) end
end

M.methods = Manager

return M