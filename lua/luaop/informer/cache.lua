-- luaop.informer.cache - an informer's cache: objects by key, newer and
-- staler than what it holds, what this process wrote or deleted (tombstones),
-- and the indexes by namespace and by label that reads ask for; its methods
-- are the informer's (luaop.informer).
--
-- The store keeps each object as its compact JSON text, without
-- metadata.managedFields (a watch event's, cut out before decoding:
-- json.event; an object from elsewhere encoded), not as Lua tables: a
-- table of tables is about twice its JSON, the text about its length
-- (docs/benchmarks.md). Every read decodes a fresh object, which is what a
-- reader gets (a reconcile changes its copy, never the cache's); what the
-- informer itself needs of a kept object (its uid, resourceVersion, a
-- label) is peeked at without decoding the rest.
local core = require "luaop.core"
local copy = require("luaop.object").copy
local trimmed = require("luaop.arguments").trimmed

local json = core.json
local decode, encode, peek, trim = json.decode, json.encode, json.peek, json.trim

local M = {}
local Informer = {} -- methods of an informer

-- The cache key of an object: "namespace/name", or "name" when cluster-scoped.
function M.key(obj)
  local md = obj.metadata or {}
  if md.namespace and md.namespace ~= "" then return md.namespace .. "/" .. md.name end
  return md.name
end
local key = M.key

local function strip(obj)
  if obj.metadata then obj.metadata.managedFields = nil end
  return obj
end

-- obj as a metadata-only cache hands it out, in place: its metadata alone,
-- as a PartialObjectMetadata (the store keeps metadata alone; the API
-- server sends it so).
local function partial(obj)
  for k in pairs(obj) do
    if k ~= "metadata" then obj[k] = nil end
  end
  obj.apiVersion, obj.kind = "meta.k8s.io/v1", "PartialObjectMetadata"
  return obj
end

-- A resourceVersion as a number, when it is one (etcd's are; the API
-- says they are opaque, so nothing is compared when they are not).
local function rv_number(obj)
  local md = type(obj) == "table" and obj.metadata
  return md and math.tointeger(tonumber(md.resourceVersion)) or nil
end

-- The same of a kept object's text.
local function rv_text(text)
  return text and math.tointeger(tonumber((peek(text, "metadata", "resourceVersion")))) or nil
end

-- The uid of a kept object's text.
local function uid_text(text)
  local uid = text and peek(text, "metadata", "uid")
  return type(uid) == "string" and uid or nil
end

-- An object decoded afresh from text the store keeps: marked when the
-- cache is trimmed (a write of it is refused: luaop.arguments).
local function fresh(self, text)
  local obj = decode(text)
  if self.opts.metadata_only then
    partial(obj)
  elseif self.cut then
    trimmed[obj] = true
  end
  return obj
end

-- The object of key k, decoded afresh from what the store keeps; nil when
-- it has none.
function Informer:object(k)
  local text = self.store[k]
  if text == nil then return nil end
  return fresh(self, text)
end

-- The uid of the object of key k, when the store has it.
function Informer:uid(k) return uid_text(self.store[k]) end

-- for k, obj in inf:each() do ... end: every cached object, decoded.
function Informer:each()
  local store, k = self.store, nil
  return function()
    local text
    k, text = next(store, k)
    if k == nil then return nil end
    return k, fresh(self, text)
  end
end

-- Whether obj is older than what the cache has of it (or than its delete).
function Informer:stale(k, obj)
  local uid = obj.metadata.uid
  if uid ~= nil and self.tombstones[uid] then return true end
  local new, old = rv_number(obj), rv_text(self.store[k])
  return new ~= nil and old ~= nil and new <= old
end

-- What this cache holds of key k newer than obj, the same object as
-- another cache has it: its own copy, when of a later resourceVersion;
-- "deleted" when this process deleted that object (observe_delete) and its
-- watch has not said so yet; nil when nothing newer.
function Informer:newer(k, obj)
  local uid = obj.metadata and obj.metadata.uid
  if uid ~= nil and self.tombstones[uid] then return "deleted" end
  local mine = self.store[k]
  if not mine or uid_text(mine) ~= uid then return nil end
  local a, b = rv_text(mine), rv_number(obj)
  if a and b and a > b then return fresh(self, mine) end
  return nil
end

-- Label indexes are held on a script's behalf (docs/security.md, "Shared
-- resources"): an index belongs to the controllers whose lists asked for
-- it, and is dropped when the last of them stops (release_indexes) or the
-- informer does. A script holds at most M.SCRIPT_LABEL_INDEXES of them,
-- over every informer (an index two scripts asked for counts for both):
-- past that its lists by other labels scan, and no script's indexes ever
-- stop another's. Building one runs in the reconcile that asked, so its
-- memory is charged to that reconcile's budget; keeping it up to date
-- runs in the informer's task. The namespace index is the informer's own
-- (at most one, made for any list by namespace, gone with it).
M.SCRIPT_LABEL_INDEXES = 8
local held = {} -- script -> label indexes its controllers hold
function M.indexes_held(script) return held[script] or 0 end

-- Indexes of the store, each made the first time a read asks for it
-- (Informer:list) and kept as objects come and go: by namespace
-- ("namespace") and by the value of one label ("label:KEY"); each maps a
-- value to the {key = true} of the objects with that value. A controller
-- that lists its dependents by label reads a few objects, not the whole
-- cache.
local function index_value(name, obj)
  local md = obj.metadata
  if not md then return nil end
  if name == "namespace" then return md.namespace end
  local v = md.labels and md.labels[name:sub(7)] -- "label:" .. key
  return type(v) == "string" and v or nil
end

-- The same of a kept object's text.
local function index_value_text(name, text)
  local v
  if name == "namespace" then v = peek(text, "metadata", "namespace")
  else v = peek(text, "metadata", "labels", name:sub(7)) end
  return type(v) == "string" and v or nil
end

-- Put key k, of index value v, into an index's map.
local function index_set(map, k, v)
  if v ~= nil then
    local set = map[v]
    if not set then set = {}; map[v] = set end
    set[k] = true
  end
end

-- Put obj (key k) into index `name`'s map.
local function index_put(map, name, k, obj) index_set(map, k, index_value(name, obj)) end

local function index_add(self, k, obj)
  for name, map in pairs(self.indexes) do index_put(map, name, k, obj) end
end

-- Take key k, of index value v, out of an index's map.
local function index_unset(map, k, v)
  local set = v ~= nil and map[v]
  if set then
    set[k] = nil
    if next(set) == nil then map[v] = nil end
  end
end

local function index_remove(self, k, obj)
  for name, map in pairs(self.indexes) do index_unset(map, k, index_value(name, obj)) end
end

-- The same, of a kept object's text.
local function index_remove_text(self, k, text)
  for name, map in pairs(self.indexes) do index_unset(map, k, index_value_text(name, text)) end
end

-- The index called name, made from the store if it is new.
function Informer:index(name)
  local map = self.indexes[name]
  if map then return map end
  map = {}
  for k, text in pairs(self.store) do index_set(map, k, index_value_text(name, text)) end
  self.indexes[name] = map
  return map
end

-- luaop_cache_objects: the count. The series is shared with informers of
-- the same kind and namespace and other selectors, and charged to the one
-- that made it: when that one stopped, this one makes it again.
-- (One the pool refused is not asked for again.)
function Informer:count_objects()
  if not self.objects_refused and not self.stopped and not self.objects:recorded() then
    self.objects, self.objects_refused = core.metrics.series("luaop_cache_objects",
      { self.kind, self.opts.namespace or "" }, self.metrics_owner)
  end
  self.objects:set(self.count)
end

-- The resource label of luaop_shard_objects_filtered_total: "group/version/
-- Kind" as the client counts what it drops before decoding
-- (luaop.client.watch), whatever form of the kind the informer was given
-- ("ConfigMap", "v1/ConfigMap"): one series per resource.
local function filtered_label(self)
  if not self.filtered_label then
    local r = self.client.resolve_seen and self.client:resolve_seen(self.kind)
    if type(r) ~= "table" or not r.gv or not r.kind then return self.kind end -- (not known yet: asked again)
    self.filtered_label = r.gv .. "/" .. r.kind
  end
  return self.filtered_label
end

-- Put obj in the cache and tell the handlers. text: obj's compact JSON
-- without managedFields (json.event's), when the caller has it; else obj
-- is encoded.
-- (defer: the handlers are told from the informer's own dispatcher task,
-- not from the caller's: a write of one reconcile must not run every
-- subscriber's handlers and maps in its task, on its budget)
function Informer:upsert(obj, defer, text)
  strip(obj)
  if text == nil and self.cut then
    -- from elsewhere (a write's answer, a LIST page) into a trimmed or
    -- metadata-only cache: as its watch would bring it
    text = trim(encode(obj), self.cut)
    if text then obj = decode(text) end
  end
  if self.opts.metadata_only then partial(obj) end
  local k = key(obj)
  if k == nil then return end -- no name: nothing a cache can keep
  if self.keep and not self.keep(obj) then -- sharded: not in its ranges (luaop.informer.shard)
    local old = self:object(k)
    if old then
      self:remove(old, defer)
    else
      core.metrics.series("luaop_shard_objects_filtered_total", { filtered_label(self) }):add()
    end
    return
  end
  local uid = obj.metadata.uid
  if uid ~= nil and self.tombstones[uid] then return end -- an event from before this process deleted it
  local old = self.store[k] -- (its text: decoded only for handlers that read it)
  self.store[k] = text or encode(obj)
  if next(self.indexes) then
    if old then index_remove_text(self, k, old) end
    index_add(self, k, obj)
  end
  if old == nil then
    self.count = self.count + 1
    self:count_objects()
    local r = text and self:reads()
    self:emit("add", r and r ~= "metadata" and fresh(self, text) or obj, nil, defer)
  elseif peek(old, "metadata", "resourceVersion") ~= obj.metadata.resourceVersion then
    local r = self:reads()
    self:emit("update", r == "all" and fresh(self, old) or nil,
      text and r ~= "metadata" and fresh(self, text) or obj, defer)
  end
end

-- What the handlers read of an add's or update's objects, the most any
-- reads: "metadata" (the new object's metadata: a controller that queues
-- its key), "object" (the new object whole), or "all" (the old one too).
-- A handler says so by its field reads (a string, or a function that
-- returns one); one that does not reads all. The informer decodes no more:
-- a watch event's object comes with its metadata alone (json.event,
-- shallow), the rest kept as text until a handler reads it.
local READS = { metadata = 1, object = 2, all = 3 }
local READ = { "metadata", "object", "all" }
-- The most any of a list of handlers (or subscriptions) reads.
function M.most_read(list)
  local most = 1
  for _, h in ipairs(list) do
    local r = h.reads
    if type(r) == "function" then r = r() end
    most = math.max(most, READS[r] or 3)
    if most == 3 then break end
  end
  return READ[most]
end
local most_read = M.most_read
function Informer:reads() return most_read(self.handlers) end

function Informer:remove(obj, defer)
  local k = key(obj)
  if k == nil then return end
  local uid = obj.metadata and obj.metadata.uid
  -- its DELETED came: the tombstone goes, whatever holds the name now
  if uid ~= nil then self.tombstones[uid] = nil end
  local text = self.store[k]
  if text == nil then return end -- gone already (this process deleted it)
  if uid and uid_text(text) ~= uid then return end -- an earlier object of that name
  local old = fresh(self, text)
  self.store[k] = nil
  if next(self.indexes) then index_remove(self, k, old) end
  self.count = self.count - 1
  self:count_objects()
  self:emit("delete", old, nil, defer)
end

-- This process wrote obj (the API server's answer): into the cache now,
-- unless the cache has it newer already.
function Informer:observe(obj)
  local k = key(obj)
  if self:stale(k, obj) then return end
  self:upsert(copy(obj), true)
end

-- This process deleted namespace/name (of uid, when known): out of the
-- cache now, and events of it from before the delete are ignored until
-- its DELETED event (or a relist). Tombstones are keyed by uid: a name
-- made again meanwhile is another object, and the DELETED of the first
-- still ends its tombstone. res: the server's answer, which still
-- holds the object when finalizers keep it.
function Informer:observe_delete(ns, name, uid, res)
  local k = ns and ns ~= "" and ns .. "/" .. name or name
  local md = type(res) == "table" and res.kind ~= "Status" and res.metadata
  if md and md.deletionTimestamp and md.finalizers and #md.finalizers > 0 then return self:observe(res) end
  local old = self.store[k]
  if old == nil or not uid or uid_text(old) ~= uid then return end -- only the object deleted
  self:remove(decode(old), true)
  self.tombstones[uid] = k
end

-- Cache reads (never yield): a fresh object, the reader's to change.
-- get(namespace, name), or get(name) when cluster-scoped (or a key).
function Informer:get(namespace, name)
  if name == nil then return self:object(namespace) end
  return self:object(namespace .. "/" .. name)
end

-- Whether holder (a controller: .script) holds label index `name` now,
-- taking it when its script may hold one more. No holder: only an index
-- that exists already.
function Informer:hold_index(name, holder)
  local hs = self.holders[name]
  -- (a stopped controller's reconcile, still running, takes no hold: it
  -- would never be let go)
  if holder == nil or type(holder.script) ~= "string" or holder.stopped then return hs ~= nil end
  if hs and hs[holder] then return true end
  local script = holder.script
  local mine = false -- the script holds this index already (through another controller)
  for h in pairs(hs or {}) do
    if h.script == script then mine = true; break end
  end
  if not mine then
    if (held[script] or 0) >= M.SCRIPT_LABEL_INDEXES then return hs ~= nil end
    held[script] = (held[script] or 0) + 1
  end
  hs = hs or {}
  hs[holder] = true
  self.holders[name] = hs
  return true
end

-- holder lets label index `name` go; the last holder's going drops it.
function Informer:release_index(name, holder)
  local hs = self.holders[name]
  if not hs or not hs[holder] then return end
  hs[holder] = nil
  local still = false
  for h in pairs(hs) do
    if h.script == holder.script then still = true; break end
  end
  if not still then held[holder.script] = held[holder.script] - 1 end
  if next(hs) == nil then
    self.holders[name] = nil
    self.indexes[name] = nil
  end
end

-- A controller stopped: every label index it held is let go.
function Informer:release_indexes(holder)
  for name in pairs(self.holders) do self:release_index(name, holder) end
end

-- Every cached object (each decoded afresh), optionally only those for
-- which filter(obj) is true. hint: {namespace =, labels = {key = value}}
-- that filter requires too, and holder (the controller asking): only the
-- objects of one index entry are tried (a label's, as usually the fewer;
-- else the namespace's), not the whole cache.
function Informer:list(filter, hint)
  local candidates = self.store
  if hint then
    local label, value = nil, nil
    for k, v in pairs(hint.labels or {}) do
      if type(k) == "string" and type(v) == "string" then label, value = k, v; break end
    end
    if label and self:hold_index("label:" .. label, hint.holder) then
      candidates = self:index("label:" .. label)[value] or {}
    elseif type(hint.namespace) == "string" and hint.namespace ~= self.opts.namespace then
      candidates = self:index("namespace")[hint.namespace] or {}
    end
  end
  local out, store = {}, self.store
  for k in pairs(candidates) do
    local obj = fresh(self, store[k])
    if not filter or filter(obj) then out[#out + 1] = obj end
  end
  return out
end

M.methods = Informer

return M