-- luaop.testing.apiserver.watches - watches, resumable from any resourceVersion, and their
-- test controls; a part of luaop.testing.apiserver.
local core = require "luaop.core"
local json = core.json
local encode = json.encode
local values_part = require "luaop.testing.apiserver.values"
local view = values_part.view
local status_part = require "luaop.testing.apiserver.status"
local bad_request, expired, field_error, invalid_options, method_not_allowed, status_text =
  status_part.bad_request, status_part.expired, status_part.field_error, status_part.invalid_options,
  status_part.method_not_allowed, status_part.status_text
local selectors_part = require "luaop.testing.apiserver.selectors"
local selectors = selectors_part.selectors
local kinds_part = require "luaop.testing.apiserver.kinds"
local split_path = kinds_part.split_path

local Server = {} -- methods of the server (luaop.testing.apiserver)

local Watch = {}
Watch.__index = Watch

-- ---- watches ---------------------------------------------------------------------------------

-- A watch of path (see the header): w:next() -> line | nil | nil, status, body.
function Server:watch(path, accept)
  if type(path) ~= "string" or path:sub(1, 1) ~= "/" then error("watch needs a path that starts with /", 2) end
  local w = setmetatable({ server = self, path = path, cond = core.task.cond(), lines = {}, head = 1, tail = 0,
    pos = 1, partial = values_part.wants_partial(accept) ~= nil }, Watch)
  local segs, query = split_path(path)
  local r, err = self:_route(segs)
  if r and r.discovery then r, err = nil, method_not_allowed() end
  if not r then return w:_end(err) end
  r.query, r.verb = query, "watch"
  local e = self:_log(r)
  local injected = self:_take_rule(e, r.k)
  if injected then
    e.injected, e.code, e.reason = true, injected.code, injected.reason
    return w:_end(injected)
  end
  local match
  match, err = selectors(r.k, query)
  if not match then
    e.code, e.reason = err.code, err.reason
    return w:_end(err)
  end
  w.k, w.namespace, w.name, w.match = r.k, r.namespace, r.name, match
  local rv = query.resourceVersion or ""
  w.rv = self.rv
  if query.sendInitialEvents == "true" then
    -- the streaming list: the state as ADDED, a bookmark marking its end,
    -- then the changes (kube-apiserver wants NotOlderThan with it)
    if query.resourceVersionMatch ~= "NotOlderThan" or query.allowWatchBookmarks ~= "true" then
      err = invalid_options("ListOptions", { query.allowWatchBookmarks ~= "true"
        and field_error("allowWatchBookmarks", "Forbidden",
          "sendInitialEvents requires setting allowWatchBookmarks to true")
        or field_error("resourceVersionMatch", "Forbidden",
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan") })
      e.code, e.reason = err.code, err.reason
      return w:_end(err)
    end
    for _, obj in ipairs(self:_sorted(r.k, r.namespace)) do
      if w:_selects(obj) then w:_push(encode { type = "ADDED", object = w:_view(obj) }) end
    end
    w:_push(encode { type = "BOOKMARK", object = { apiVersion = r.k.gv, kind = r.k.kind,
      metadata = { resourceVersion = tostring(self.rv), annotations = { ["k8s.io/initial-events-end"] = "true" } } } })
    w.pos = #self.events + 1
  elseif rv == "" or rv == "0" then
    -- the state first, as ADDED, then what changes from now on
    for _, obj in ipairs(self:_sorted(r.k, r.namespace)) do
      if w:_selects(obj) then w:_push(encode { type = "ADDED", object = w:_view(obj) }) end
    end
    w.pos = #self.events + 1
  else
    local n = math.tointeger(tonumber(rv))
    if not n or n < 0 then
      err = bad_request(("invalid resource version: %q"):format(rv))
    elseif n < self.oldest then
      err = expired(n, self.oldest)
    end
    if err then
      e.code, e.reason = err.code, err.reason
      return w:_end(err)
    end
    w.rv = n
    -- the first event after n (events are in resourceVersion order)
    local lo, hi = 1, #self.events + 1
    while lo < hi do
      local mid = (lo + hi) // 2
      if self.events[mid].rv > n then hi = mid else lo = mid + 1 end
    end
    w.pos = lo
  end
  e.code = 200
  self.watches[w] = true
  return w
end

function Watch:_push(line)
  self.tail = self.tail + 1
  self.lines[self.tail] = line
end

function Watch:_selects(obj)
  local md = obj.metadata
  if self.namespace and md.namespace ~= self.namespace then return false end
  if self.name and md.name ~= self.name then return false end
  return self.match(obj)
end

-- An event as this watch sees it: type, object | nil. An object that stops
-- matching the selectors arrives as DELETED, one that starts as ADDED.
function Watch:_translate(ev)
  if ev.store ~= self.k.store then return nil end
  local now_in = self:_selects(ev.object)
  if ev.type == "ADDED" then return now_in and "ADDED" or nil, ev.object end
  if ev.type == "DELETED" then
    local was_in = now_in
    if ev.old then was_in = self:_selects(ev.old) end
    return was_in and "DELETED" or nil, ev.object
  end
  local was_in = ev.old ~= nil and self:_selects(ev.old)
  if now_in and was_in then return "MODIFIED", ev.object end
  if now_in then return "ADDED", ev.object end
  if was_in then return "DELETED", ev.object end
  return nil
end

-- An object as this watch sends it: its version's view, or its metadata
-- alone (a metadata-only watch's Accept).
function Watch:_view(obj)
  if self.partial then return values_part.partial(obj) end
  return view(self.k, obj)
end

function Watch:_scan()
  local events = self.server.events
  while self.pos <= #events do
    local ev = events[self.pos]
    self.pos = self.pos + 1
    self.rv = ev.rv
    local typ, obj = self:_translate(ev)
    if typ then return encode { type = typ, object = self:_view(obj) } end
  end
end

-- The next event's JSON line, waiting (yielding the task) until there is
-- one | nil (ended cleanly, or closed) | nil, status, body (an error).
function Watch:next()
  while true do
    local line = self.lines[self.head]
    if self.ended and not (self.drain and line) then
      if self.err then return nil, self.err.code, status_text(self.err) end
      return nil
    end
    if line then
      self.lines[self.head] = nil
      self.head = self.head + 1
      return line
    end
    line = not self:_held() and self:_scan()
    if line then return line end
    if self.waiting then error("another task is already waiting on this watch", 2) end
    self.waiting = true
    self.cond:wait()
    self.waiting = false
  end
end

-- w:next_event([cut [, shallow]]): next()'s line taken apart as
-- json.event takes it (type, object, text), or false, line; the end as
-- next()'s (as the runtime's watch, src/lbind_watch.c).
function Watch:next_event(cut, shallow)
  local line, status, body = self:next()
  if not line then return nil, status, body end
  local typ, obj, text = json.event(line, cut, shallow)
  if typ ~= nil then return typ, obj, text end
  return false, line
end

-- Whether changes are held back from this watch now (hold_watches).
function Watch:_held()
  for _, match in ipairs(self.server.holds) do
    if type(match) == "function" then
      if match(self.path) then return true end
    elseif self.path:find(match) then
      return true
    end
  end
  return false
end

-- End the watch with err (a failure) or cleanly (nil); returns it. With
-- drain, the events so far are still delivered first (a server that ends
-- a stream has sent what it had).
function Watch:_end(err, drain)
  if self.ended then return self end
  if drain and self.k then
    for line in function() return self:_scan() end do self:_push(line) end
  end
  self.ended, self.err, self.drain = true, err, drain
  self.server.watches[self] = nil
  self.cond:signal()
  return self
end

-- Stop the watch; a next() waiting on it returns nil.
function Watch:close()
  self:_end(nil)
end
Watch.__close = Watch.close

-- Every open watch ends with 410 Expired, and resourceVersions handed out
-- so far become too old to watch from (a relist is due).
function Server:expire_watches()
  self.oldest = self.rv
  for w in pairs(self.watches) do w:_end(expired(w.rv, self.oldest)) end
end

-- Every open watch ends cleanly, as when the API server's timeout ends it.
function Server:end_watches()
  for w in pairs(self.watches) do w:_end(nil, true) end
end

-- Hold back the changes from the watches whose path `match` picks (a Lua
-- pattern, or a function(path) -> boolean), opened now or later, until
-- release_watches(): then they get them, in order. Two watches of a real
-- API server are not in step: one informer's cache can lag another's by
-- any time (a busy apiserver, a client that did not read its socket yet).
-- What a watch sends when it starts (the state, for a list by watch) is
-- not held.
function Server:hold_watches(match)
  if type(match) ~= "string" and type(match) ~= "function" then
    error("hold_watches needs a pattern or a function of the watch's path", 2)
  end
  self.holds[#self.holds + 1] = match
end

function Server:release_watches()
  self.holds = {}
  for w in pairs(self.watches) do
    if w.waiting then w.cond:signal() end
  end
end

return { methods = Server }
