-- luaop.client.watch - a watch stream's events, decoded and checked: an
-- event that cannot be used ends the watch with a reason an informer acts on;
-- a part of luaop.client.
local core = require "luaop.core"
local errors = require "luaop.client.errors"

local json = core.json
local decode = json.decode
local api_error, skip_undecodable = errors.error, errors.skip_undecodable

local M = {}

local Watch = {}
Watch.__index = Watch

local EVENT_TYPES = { ADDED = true, MODIFIED = true, DELETED = true, BOOKMARK = true }

-- Why a decoded watch event (not an ERROR) cannot be used, or nil: an
-- unknown type, an object that is not an object, metadata errors.bad_metadata
-- refuses (a name, but for a BOOKMARK; a namespace that is the watched one).
local function malformed_event(typ, obj, ns)
  if type(typ) ~= "string" or not EVENT_TYPES[typ] then
    return ("an unknown type, %s"):format(type(typ) == "string" and ("%q"):format(typ:sub(1, 64)) or
      (typ == nil or typ == json.null) and "none" or "a " .. type(typ))
  end
  if type(obj) ~= "table" then
    return ("%s, whose object is %s"):format(typ, (obj == nil or obj == json.null) and "null" or "a " .. type(obj))
  end
  local why = errors.bad_metadata(rawget(obj, "metadata"), ns, typ == "BOOKMARK")
  return why and ("%s, whose object %s"):format(typ, why)
end

-- Whether a decoder's error is one of its limits (nesting, a number out of
-- range): JSON a server may send for an object luaop cannot hold, rather
-- than a broken frame.
local function a_limit(derr)
  return type(derr) == "string" and (derr:find("^nesting") or derr:find("^number out of range")) ~= nil
end

-- luaop_watch_malformed_events_total of this watch's resource: one more.
function Watch:count_malformed()
  core.metrics.series("luaop_watch_malformed_events_total", { self.gv .. "/" .. self.kind }):add()
end

-- The end of a watch on an event of type ERROR, its object st.
local function ended(self, st)
  st = type(st) == "table" and st or {}
  self.err = api_error(tonumber(st.code) or 500, st)
  return nil, self.err
end

-- The end of a watch on an event it cannot use (why).
local function malformed(self, why)
  -- what comes after it cannot be trusted either: the watch ends, and an
  -- informer lists again (reason "MalformedEvent")
  self:count_malformed()
  self.err = api_error(0, "malformed watch event: " .. why)
  self.err.reason = "MalformedEvent"
  return nil, self.err
end

-- The next event: type (ADDED, MODIFIED, DELETED, BOOKMARK), object, and
-- the object's compact text without metadata.managedFields (json.event:
-- what an informer's cache keeps; nil when the line took the long way). At
-- the end of the stream nil (a clean end: the server's timeout) or nil, err
-- (410 Gone is reason "Expired" or "Gone": list again).
function Watch:next()
  -- (a queued line taken apart where it lies in C: json.event's results,
  -- or false and the line when json.event does not take it)
  local typ, obj, text, reason = self.raw:next_event(self.cut, self.shallow)
  if self.shard then M.count_filtered(self) end
  if typ == nil then
    local status, body = obj, text
    if status then
      self.err = api_error(status, body)
      if reason then -- luaop ended it: an event longer than a frame may be, a malformed list
        self.err.reason, self.err.message = reason, body
        self:count_malformed()
      end
      return nil, self.err
    end
    return nil
  end
  if typ then -- the usual line: one pass, managedFields never decoded
    if typ == "ERROR" then return ended(self, obj) end
    if typ == "LIST" and self.list then return typ, obj end -- (a list's end: its metadata)
    local why = malformed_event(typ, obj, self.namespace)
    if why then return malformed(self, why) end
    return typ, obj, text
  end
  -- any other line, decoded whole: what is wrong with it, if anything
  local line = obj
  local ev, derr = decode(line)
  if type(ev) ~= "table" then
    typ = json.peek(line, "type")
    if a_limit(derr) and type(typ) == "string" and json.peek(line, "object") == nil then
      -- an event whose object does not decode: skipped, the watch goes on
      -- (a cut or garbled line is no such event: it may have been a
      -- DELETED, so it is malformed, below, and an informer lists again)
      skip_undecodable(self.gv, self.kind, line, derr, "object", "metadata")
      return self:next()
    end
    -- a line that is not JSON (a garbled or cut frame): as malformed
    return malformed(self, tostring(derr))
  end
  typ, obj = rawget(ev, "type"), rawget(ev, "object")
  if typ == "ERROR" then return ended(self, obj) end
  local why = malformed_event(typ, obj, self.namespace)
  if why then return malformed(self, why) end
  return typ, obj
end

-- for type, obj in w:events() do ... end; afterwards w.err says why it ended.
function Watch:events()
  return function() return self:next() end
end

function Watch:close()
  self.raw:close()
end
Watch.__close = Watch.close

-- luaop_shard_objects_filtered_total of a resource: n more.
function M.filtered(gv, kind, n)
  if n > 0 then core.metrics.series("luaop_shard_objects_filtered_total", { gv .. "/" .. kind }):add(n) end
end

-- The events the C side left out since last counted.
function M.count_filtered(w)
  local n = w.raw:dropped()
  M.filtered(w.gv, w.kind, n - w.counted)
  w.counted = n
end

-- A watch of path's stream (api.watch; ended by luaop after `limit`
-- seconds, when given), decoding gv/kind's events; ns: the namespace
-- watched (nil: all, or a cluster-scoped kind); shard: hash ranges, the
-- events of objects whose namespace is certainly outside them left out
-- before they are decoded (api.watch); accept: the Accept header (a
-- metadata-only watch's); cut: what of each object the text it hands
-- keeps (json.cut; default: all but managedFields); shallow: an event's
-- object is its metadata alone, {metadata = ...}, beside the whole text
-- (json.event: an informer's, which decodes what its handlers read); list:
-- path is a LIST, read as it arrives (api.watch's list: what each item's
-- object begins with), its items ADDED events, then a LIST event whose
-- object is the list's own (its metadata: resourceVersion, continue).
function M.open(path, limit, gv, kind, ns, shard, accept, cut, shallow, list)
  return setmetatable({ raw = core.api.watch { path = path, timeout = limit, shard = shard, accept = accept,
    list = list }, gv = gv, kind = kind, namespace = ns, shard = shard, counted = 0, cut = cut,
    shallow = shallow, list = list ~= nil }, Watch)
end

return M
