-- luaop.plan - what a controller subscribes to, on the manager's shared
-- informers: events of its resource enqueue the object, events of owned
-- kinds their controller owner, events of watched kinds what the watch's
-- map function names. Keys are "namespace/name", or "name".
local core = require "luaop.core"
local copy = require("luaop.object").copy
local informer = require "luaop.informer"
local definition = require "luaop.definition"
local context = require "luaop.context"
local filter = require "luaop.filter"
local kind_name = definition.kind_name
local error_text = require("luaop.client").error_text

local M = {}

local function split_key(k)
  local ns, name = k:match("^([^/]*)/(.*)$")
  if ns then return ns, name end
  return nil, k
end

local function req_key(namespace, name)
  return namespace and namespace ~= "" and (namespace .. "/" .. name) or name
end

M.split_key = split_key

-- Where a script's function is written ("file.lua:12"), or "?".
local function line_of(f)
  local ok, line, source = pcall(core.check.line, f)
  if ok and type(source) == "string" and source:sub(1, 1) == "@" then return ("%s:%d"):format(source:sub(2), line) end
  return "?"
end

-- The error a script's function f raised, as text, and where f is
-- written (" (file.lua:12)") when the error names no line of f's file (or
-- ""): one raised at level 2 by a call f made as a tail call (`return
-- ctx:list("Nope")`) has no line of the script's to name.
local function raised_in(f, err)
  local text = error_text(err)
  local at = line_of(f)
  local file = at:match("^(.*):%d+$")
  if file and text:sub(1, #file + 1) ~= file .. ":" then return text, (" (%s)"):format(at) end
  return text, ""
end

-- The requests a watch's map returned: nothing (nil or false), a list of
-- requests, or one request (a table with a name) as a list of one; each
-- read raw (no metamethod of the script's runs outside its budget), as
-- {namespace, name}. Anything else raises, naming the map: enqueueing
-- nothing would hide the mistake.
function M.map_requests(reqs, w)
  if reqs == nil or reqs == false then return {} end
  local function bad(what)
    error(("watch map of %s (%s) returned %s: want a list of requests { { namespace =, name = }, ... } or one "
      .. "request { namespace =, name = }"):format(w[1], line_of(w.map), what), 0)
  end
  if type(reqs) ~= "table" then bad(definition.shown(reqs)) end
  if rawget(reqs, "name") ~= nil then reqs = { reqs } end
  local n = rawlen(reqs)
  if n == 0 and next(reqs) ~= nil then bad("a table that is neither a list of requests nor a request (no name)") end
  local out = {}
  for i = 1, n do
    local r = rawget(reqs, i)
    if type(r) ~= "table" then bad(("%s as request %d"):format(definition.shown(r), i)) end
    local name, ns = rawget(r, "name"), rawget(r, "namespace")
    if type(name) ~= "string" or name == "" then
      bad(("a request (%d) whose name is %s, not a non-empty string"):format(i, definition.shown(name)))
    end
    if ns ~= nil and type(ns) ~= "string" then
      bad(("a request (%d) whose namespace is %s, not a string"):format(i, definition.shown(ns)))
    end
    out[i] = { ns, name }
  end
  return out
end

-- Each definition's filter for its handlers (definition -> pass | false)
local handler_filters = setmetatable({}, { __mode = "k" })

-- Tell controller c's handler `h` of an event (copies of the objects), in
-- the informer's task under the controller's instruction budget: like a
-- watch's map it may read the caches, log and record Events, not wait.
-- Nothing before the controller runs (the caches synced, and leading):
-- then every cached object is an on_add (worker.start_workers).
function M.deliver(self, c, h, a, b)
  local f = c.def[h]
  if not f or not c.running or c.stopped then return end
  local pass = handler_filters[c.def]
  if pass == nil then
    pass = filter.new(c.def.filter, definition.budgets(c.def), c.log, "resource " .. c.def.resource) or false
    handler_filters[c.def] = pass
  end
  if pass and not pass(h ~= "on_add" and a or nil, h == "on_update" and b or h == "on_add" and a or nil) then return end
  local o = b or a
  -- sharded: the events of the keys this replica holds (luaop.shard)
  if self.shard and not self.shard:ours(c, informer.key(o)) then return end
  local ctx = context.new { manager = self, client = self.client, controller = c,
    log = c.log:with { namespace = o.metadata.namespace, name = o.metadata.name } }
  local ok, err = core.task.call_limited(definition.budgets(c.def), f, ctx, copy(a),
    b ~= nil and copy(b) or nil)
  if not ok then
    local text, at = raised_in(f, err)
    error(("%s of %s%s: %s"):format(h, c.name, at, text), 0)
  end
end

-- The subscriptions a definition needs: {entry, add, update, delete} each,
-- enqueueing into controller c.
function M.plan(self, c, def)
  local function enqueue(key) c.enqueue(key) end
  -- sharded by uid: the uid a key's object had, for keys whose object is
  -- not cached (deleted; an owner another replica holds): luaop.shard
  local function note_uid(key, uid)
    if self.shard and def.shard_by == "uid" and type(uid) == "string" then
      c.shard_uids = c.shard_uids or {}
      c.shard_uids[key] = uid
    end
  end
  local subs = {}
  -- (an event its filter drops goes no further: luaop.filter)
  local function sub(e, on, f, what)
    on.entry, on.log = e, c.log
    local pass = filter.new(f, definition.budgets(def), c.log, what)
    if pass then
      local add, update, delete = on.add, on.update, on.delete
      on.add = function(o) if pass(nil, o) then add(o) end end
      on.update = function(old, o) if pass(old, o) then update(old, o) end end
      on.delete = function(o) if pass(o, nil) then delete(o) end end
      on.reads = "all" -- (the filter reads both)
    end
    subs[#subs + 1] = on
  end
  -- sharded by namespace, the resource's informer keeps only the
  -- namespaces of this replica's ranges, and so do the owned kinds' when
  -- the resource is namespaced (an owner's children share its namespace)
  local by_ns = self.shard and def.reconcile and (def.shard_by or "namespace") == "namespace"
  local primary = self:entry(def.resource, {
    namespace = def.namespace, label_selector = def.label_selector, field_selector = def.field_selector,
    sharded = by_ns, metadata_only = def.metadata_only, trim = def.trim,
  })
  if def.reconcile then
    sub(primary, {
      primary = true, reads = "metadata", -- (its key; a delete's uid)
      add = function(o) enqueue(informer.key(o)) end,
      update = function(_, o) enqueue(informer.key(o)) end,
      delete = function(o)
        local key = informer.key(o)
        note_uid(key, o.metadata.uid)
        enqueue(key)
      end,
    }, def.filter, "resource " .. def.resource)
  else
    -- handlers: told of each event once the controller runs (M.deliver,
    -- which runs the filter: on the adds of the cache when it starts too)
    sub(primary, {
      primary = true,
      add = function(o) M.deliver(self, c, "on_add", o) end,
      update = function(old, o) M.deliver(self, c, "on_update", old, o) end,
      delete = function(o) M.deliver(self, c, "on_delete", o) end,
    })
  end
  -- owned kinds: an event on an object enqueues its controller owner, as
  -- controller-runtime's EnqueueRequestForOwner: a controller reference of
  -- the resource's group and kind (the version aside), the owner's key by
  -- the resource's scope: the object's namespace and the owner's name, or
  -- the name alone for a cluster-scoped owner (a Namespace owning the
  -- ResourceQuota made for it), the key its own events have.
  local owner_kind = kind_name(def.resource)
  local function owner(o)
    local refs = o.metadata.ownerReferences
    if type(refs) ~= "table" then return end
    -- The resource as discovery has it, never asking the server (a handler
    -- must not wait). Not yet known only before the resource's own cache
    -- first resolved it, so before it listed: its sync will queue every
    -- object of it, this owner among them, and nothing is lost by
    -- enqueueing no guess (the child's namespace was the wrong one).
    local r = self.client:resolve_seen(def.resource)
    if not r then return end
    local group = r.gv:match("^(.*)/[^/]*$") or ""
    for _, ref in ipairs(refs) do
      if type(ref) == "table" and ref.controller and ref.kind == owner_kind and type(ref.name) == "string"
        and type(ref.apiVersion) == "string" and (ref.apiVersion:match("^(.*)/[^/]*$") or "") == group then
        local key = req_key(r.namespaced and o.metadata.namespace or nil, ref.name)
        note_uid(key, ref.uid)
        enqueue(key)
      end
    end
  end
  for _, e in ipairs(def.owns or {}) do
    local kind, f = filter.owned(e)
    -- (sharded once its first sync found the resource namespaced)
    sub(self:entry(kind, { namespace = def.namespace, sharded = by_ns,
      owner = by_ns and { def.resource, kind } or nil, metadata_only = type(e) == "table" and e.metadata_only,
      trim = type(e) == "table" and e.trim or nil }),
      { add = owner, update = function(old, o) owner(old); owner(o) end, delete = owner }, f, "owns " .. kind)
  end
  -- watched kinds: the map function names the requests
  -- map(obj, ctx) may read the caches through ctx (get, list); it runs in
  -- the informer's task under the reconcile's instruction budget, so one
  -- that runs away fails (logged by the informer) instead of stalling
  -- luaop. It gets copies, as a reconcile does: the informer is shared
  -- with other controllers, other scripts' among them.
  -- (a logger of its own: c.log is the controller's, which luaop logs with)
  local map_ctx = context.new { manager = self, client = self.client, log = c.log:with {}, controller = c }
  for _, w in ipairs(def.watches or {}) do
    -- a watched kind's cache is whole (its objects may map to keys of any
    -- namespace), unless the entry says sharded: its objects map to keys
    -- of their own namespace, and it keeps only this replica's, as an
    -- owned kind's (whole when the resource or the kind is cluster-scoped,
    -- which its first sync learns)
    local sharded = by_ns and w.sharded == true
    local e = self:entry(w[1], { namespace = w.namespace, label_selector = w.label_selector,
      field_selector = w.field_selector, sharded = sharded, owner = sharded and { def.resource, w[1] } or nil,
      metadata_only = w.metadata_only, trim = w.trim })
    local warned = false
    local function map(o)
      local ok, reqs = core.task.call_limited(definition.budgets(def), w.map, copy(o), map_ctx)
      if not ok then
        local text, at = raised_in(w.map, reqs)
        error(("watch map of %s%s: %s"):format(w[1], at, text), 0)
      end
      for _, req in ipairs(M.map_requests(reqs, w)) do
        if e.inf.shard and not warned and req[1] ~= o.metadata.namespace then
          -- its replica may not hold that key, and the one that does never
          -- sees this object: say so, once
          warned = true
          c.log:error("a sharded watch's map named a key of another namespace: the replica holding it does not "
            .. "see this object (drop sharded from the watch)",
            { watch = w[1], object = informer.key(o), key = req_key(req[1], req[2]) })
        end
        enqueue(req_key(req[1], req[2]))
      end
    end
    sub(e, { add = map, update = function(_, o) map(o) end, delete = map, reads = "object" }, w.filter,
      "watches " .. w[1])
  end
  return subs, primary
end

return M
