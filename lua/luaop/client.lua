-- luaop.client - the typed Kubernetes client: kinds in, objects out.
--
-- Scripts speak in kinds ("Pod", "v1/Pod", "apps/v1/Deployment",
-- "cnat.programming-kubernetes.info/v1alpha1/At"), never URLs: discovery maps
-- a kind to its resource and scope, cached and refreshed on a miss, so a CRD
-- installed after start works. Every call that talks to the API server
-- yields the calling task until the answer is in.
--
-- API failures return nil, err; err has code (HTTP status, 0 when no answer
-- came), reason (NotFound, Conflict, AlreadyExists, Forbidden, Invalid, ...)
-- and message. Misuse (a missing kind or name) raises.
local core = require "luaop.core"
local events = require "luaop.events"

local json, api = core.json, core.api
local encode, decode = json.encode, json.decode

local client = {}
client.__index = client

-- ---- errors -----------------------------------------------------------------

-- Errors' metatable holds metamethods only, no __index: what indexing an
-- error misses is nil, never this table (a script holding an error must not
-- reach the one metatable every error of every script shares).
local Error = {}
-- "Reason (code): message", as luaop's core writes an error raised as a
-- value (src/sched.c), without the code when no answer came.
local function describe(e)
  local reason, message, code = rawget(e, "reason"), rawget(e, "message"), rawget(e, "code")
  reason = type(reason) == "string" and reason or "Error"
  if math.type(code) == "integer" and code > 0 then reason = ("%s (%d)"):format(reason, code) end
  if type(message) ~= "string" then return reason end
  return reason .. ": " .. message
end
Error.__tostring = describe

local reason_of_code = {
  [400] = "BadRequest", [401] = "Unauthorized", [403] = "Forbidden", [404] = "NotFound",
  [405] = "MethodNotAllowed", [406] = "NotAcceptable", [409] = "Conflict", [410] = "Gone",
  [413] = "RequestEntityTooLarge", [415] = "UnsupportedMediaType", [422] = "Invalid",
  [429] = "TooManyRequests", [500] = "InternalError", [503] = "ServiceUnavailable",
  [504] = "Timeout",
}

-- An error from an HTTP status and body (a metav1.Status when the API server
-- wrote it), or from a transport failure (code 0).
-- Seconds a watch asked to end after timeoutSeconds may run past it
-- before luaop ends it.
client.WATCH_SLACK = 30

local function api_error(code, body)
  local err = setmetatable({ code = code or 0 }, Error)
  if code == nil or code == 0 then
    err.message = body or "request failed"
    err.reason = err.message:find("timed out", 1, true) and "Timeout" or "TransportError"
    return err
  end
  -- body: the response text, or an already decoded Status
  local status = type(body) == "table" and body or (body and body ~= "" and decode(body))
  if type(status) == "table" and status.kind == "Status" then
    if type(status.reason) == "string" and status.reason ~= "" then err.reason = status.reason end
    if type(status.message) == "string" then err.message = status.message end
    if type(status.details) == "table" then err.details = status.details end
  end
  err.reason = err.reason or reason_of_code[code] or (code >= 500 and "InternalError" or "Unknown")
  err.message = err.message or ("the server answered HTTP %d"):format(code)
  return err
end
client.error = api_error

local function is_error(v)
  return getmetatable(v) == Error
end
client.is_error = is_error

-- The text of any error value, running none of its metamethods (a
-- script's __tostring is its code, and may never return): a string or
-- number as it is, a table as an API error's reason, code and message,
-- anything else by its type.
function client.error_text(v)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then return tostring(v) end
  if t == "table" and (type(rawget(v, "reason")) == "string" or type(rawget(v, "message")) == "string") then
    return describe(v)
  end
  return ("(error object is a %s value)"):format(t)
end

-- ---- requests -----------------------------------------------------------------

local function escape(s)
  return (tostring(s):gsub("[^%w%-%._~]", function(c) return ("%%%02X"):format(c:byte()) end))
end

local function query(params)
  local keys = {}
  for k, v in pairs(params) do
    if v ~= nil and v ~= false and v ~= "" then keys[#keys + 1] = k end
  end
  if #keys == 0 then return "" end
  table.sort(keys)
  for i, k in ipairs(keys) do
    local v = params[k]
    keys[i] = escape(k) .. "=" .. (v == true and "true" or escape(v))
  end
  return "?" .. table.concat(keys, "&")
end

-- An answer of api.request or of a started request's wait: the body's text
-- | nil, err.
local function answer(status, text)
  if status == nil then return nil, api_error(0, text) end
  if status < 200 or status > 299 then return nil, api_error(status, text) end
  return text, status
end

-- A 2xx answer whose body is not JSON.
-- An object the server sent that does not decode (nested deeper than the
-- decoder goes, a number out of range) is left out, logged by name when
-- that much can be read, and counted (core.counters().undecodable_objects),
-- so one such object never stops the rest of its kind from syncing.
local function skip_undecodable(gv, kind, text, err, ...)
  local name = json.peek(text, ...) -- the object's metadata, if that decodes
  local fields = { kind = kind, error = err }
  if type(name) == "table" then
    fields.name = type(name.name) == "string" and name.name or nil
    fields.namespace = type(name.namespace) == "string" and name.namespace or nil
  end
  core.count("undecodable_objects")
  core.metrics.series("luaop_decode_errors_total", { gv .. "/" .. kind }):add()
  -- a Warning Event on it, when its name could be read
  if fields.name then
    events.record {
      regarding = { apiVersion = gv, kind = kind, metadata = { name = fields.name, namespace = fields.namespace } },
      type = "Warning", reason = "UndecodableObject", action = "Decode", controller = "informer",
      note = "left out of the cache: " .. tostring(err),
    }
  end
  core.log.write("error", "client", "skipping an object that cannot be decoded", fields)
end

local function malformed(status, err)
  return setmetatable({ code = status, reason = "InternalError",
    message = "the server sent malformed JSON: " .. err }, Error)
end

-- Send a request; returns the decoded body (or true when empty) | nil, err.
local function call(method, path, body, content_type, timeout)
  local text, status = answer(api.request {
    method = method, path = path, timeout = timeout,
    body = body and (type(body) == "string" and body or encode(body)),
    content_type = body and (content_type or "application/json"),
  })
  if not text then return nil, status end
  if text == "" then return true end
  local v, err = decode(text)
  if v == nil then return nil, malformed(status, err) end
  return v
end

-- ---- discovery ------------------------------------------------------------------

-- gv ("v1", "apps/v1") -> {kinds = {Kind = {resource, namespaced}}} | false (404)
local groups = {}

local function gv_path(gv)
  return gv:find("/", 1, true) and "/apis/" .. gv or "/api/" .. gv
end

local function load_gv(gv)
  local list, err = call("GET", gv_path(gv))
  if not list then
    if err.code == 404 then
      groups[gv] = false
      return false
    end
    return nil, err
  end
  local kinds = {}
  for _, r in ipairs(type(list) == "table" and list.resources or {}) do
    if not r.name:find("/", 1, true) then
      kinds[r.kind] = { gv = gv, kind = r.kind, resource = r.name, namespaced = r.namespaced }
    end
  end
  groups[gv] = { kinds = kinds }
  return groups[gv]
end

-- The resource of kind in gv | nil (none) | nil, err. With refresh, a cached
-- group version without the kind is loaded again, unless `fresh` says this
-- lookup loaded it already.
local function find(gv, kind, refresh, fresh)
  local g = groups[gv]
  if g == nil or (refresh and not fresh[gv] and not (g and g.kinds[kind])) then
    local err
    g, err = load_gv(gv)
    if g == nil then return nil, err end
    fresh[gv] = true
  end
  return g and g.kinds[kind] or nil
end

-- The preferred versions of the named groups the server serves.
local function group_versions()
  local list, err = call("GET", "/apis")
  if not list then return nil, err end
  local out = {}
  for _, g in ipairs(type(list) == "table" and list.groups or {}) do
    if g.preferredVersion then out[#out + 1] = g.preferredVersion.groupVersion end
  end
  return out
end

-- Parse "Kind", "v1/Kind", "group/version/Kind" into gv (or nil) and kind.
local function split_kind(spec)
  local parts = {}
  for p in spec:gmatch("[^/]+") do parts[#parts + 1] = p end
  if #parts == 1 then return nil, parts[1] end
  if #parts == 2 then return parts[1], parts[2] end
  if #parts == 3 then return parts[1] .. "/" .. parts[2], parts[3] end
  error(("bad kind %q: want Kind, version/Kind or group/version/Kind"):format(spec), 3)
end

local bare = {} -- bare kind -> resolution

-- Resolve a kind to {gv, kind, resource, namespaced} | nil, err. A miss is
-- looked up again (each group version at most once per lookup), so the
-- kinds of CRDs installed after start resolve. Misses are not cached.
function client:resolve(spec)
  if type(spec) ~= "string" or spec == "" then error("a kind is required", 2) end
  local gv, kind = split_kind(spec)
  if not gv and bare[kind] then return bare[kind] end
  local fresh = {}
  for pass = 1, 2 do
    local refresh = pass == 2
    local r, err = find(gv or "v1", kind, refresh, fresh)
    if err then return nil, err end
    if not r and not gv then
      -- not core: the named groups' preferred versions (listed again on
      -- the second pass, for groups that appeared meanwhile)
      local named
      named, err = group_versions()
      if not named then return nil, err end
      for _, c in ipairs(named) do
        r, err = find(c, kind, refresh, fresh)
        if err then return nil, err end
        if r then break end
      end
    end
    if r then
      if not gv then bare[kind] = r end
      return r
    end
  end
  return nil, setmetatable({
    code = 404, reason = "NotFound",
    message = ("the server has no resource for kind %s%s"):format(gv and gv .. "/" or "", kind),
  }, Error)
end

-- ---- paths ------------------------------------------------------------------------

-- The collection path of a resolved kind, in namespace ns (nil: all namespaces).
local function collection(r, ns)
  local base = gv_path(r.gv)
  if r.namespaced and ns then
    return ("%s/namespaces/%s/%s"):format(base, escape(ns), r.resource)
  end
  return ("%s/%s"):format(base, r.resource)
end

function client:namespace_of(r, ns)
  if not r.namespaced then return nil end
  return ns or self.namespace
end

-- Kind spec and namespace/name of an object.
local function object_ref(obj)
  if type(obj) ~= "table" then error("an object (table) is required", 3) end
  if type(obj.kind) ~= "string" or type(obj.apiVersion) ~= "string" then
    error("the object needs apiVersion and kind", 3)
  end
  local md = obj.metadata or {}
  return obj.apiVersion .. "/" .. obj.kind, md.namespace, md.name
end

-- name_or_req: a name, or a request {namespace =, name =}
local function name_ns(name_or_req, ns)
  if type(name_or_req) == "table" then
    return name_or_req.name, name_or_req.namespace or ns
  end
  return name_or_req, ns
end

-- ---- verbs ---------------------------------------------------------------------------

-- get(kind, name [, namespace]) or get(kind, {namespace =, name =})
function client:get(kind, name_or_req, ns)
  local name
  name, ns = name_ns(name_or_req, ns)
  if type(name) ~= "string" or name == "" then error("get needs a name", 2) end
  local r, err = self:resolve(kind)
  if not r then return nil, err end
  return call("GET", collection(r, self:namespace_of(r, ns)) .. "/" .. escape(name))
end

-- list(kind [, opts]): opts.namespace (default the client's), opts.all_namespaces,
-- opts.label_selector, opts.field_selector, opts.limit (page size, default 500),
-- opts.timeout (seconds for each page, retries included; default none).
-- Pages through continue tokens; returns the list with every item. With
-- opts.each_page(items), hands over each page's items instead of keeping them.
-- The next page is asked for before this one is decoded (its continue token
-- is read first, by json.peek), so the server works on it meanwhile.
function client:list(kind, opts)
  opts = opts or {}
  local r, err = self:resolve(kind)
  if not r then return nil, err end
  local ns = not opts.all_namespaces and self:namespace_of(r, opts.namespace) or nil
  local path = collection(r, ns)
  local function start(continue)
    return api.start { method = "GET", timeout = opts.timeout, path = path .. query {
      labelSelector = opts.label_selector, fieldSelector = opts.field_selector,
      limit = opts.limit or 500, continue = continue,
    } }
  end
  local items, pending = json.array(), start(nil)
  local list -- the last page
  repeat
    local text, status = answer(pending:wait())
    if not text then return nil, status end
    local md, perr = json.peek(text, "metadata")
    local page, derr
    if not perr then
      local continue = type(md) == "table" and md["continue"]
      pending = type(continue) == "string" and continue ~= "" and start(continue) or nil
      page, derr = decode(text)
      if page == nil then
        -- decode item by item, leaving out the ones that do not decode
        local skipped
        page, skipped = json.decode_page(text)
        for _, s in ipairs(page and skipped or {}) do
          skip_undecodable(r.gv, r.kind, s.text, s.error, "metadata")
        end
        if page then derr = nil end
      end
    end
    -- let the page's text be collected while its items are handled (the nil is never read)
    text = nil -- luacheck: ignore 311
    if page == nil then
      if pending then pending:cancel() end
      return nil, malformed(status, perr or derr)
    end
    for _, item in ipairs(page.items or {}) do
      -- Items of a list carry no apiVersion/kind: give them theirs.
      item.apiVersion = item.apiVersion or r.gv
      item.kind = item.kind or r.kind
      if not opts.each_page then items[#items + 1] = item end
    end
    if opts.each_page then
      -- the next page is not wanted when this one's handler raises
      local ok, herr = pcall(opts.each_page, page.items or {})
      if not ok then
        if pending then pending:cancel() end
        error(herr, 0)
      end
    end
    list = page
  until not pending
  list.items = items
  if list.metadata then list.metadata["continue"] = nil end
  return list
end

local function write_path(self, obj, with_name, sub)
  local kind, ns, name = object_ref(obj)
  local r, err = self:resolve(kind)
  if not r then return nil, err end
  if r.namespaced and obj.metadata then obj.metadata.namespace = ns or self.namespace end
  local path = collection(r, self:namespace_of(r, ns))
  if with_name then
    if type(name) ~= "string" or name == "" then error("the object needs metadata.name", 3) end
    path = path .. "/" .. escape(name)
  end
  return path .. (sub and "/" .. sub or "")
end

-- create(obj [, opts]): opts.field_manager, opts.dry_run
function client:create(obj, opts)
  opts = opts or {}
  local path, err = write_path(self, obj, false)
  if not path then return nil, err end
  return call("POST", path .. query { fieldManager = opts.field_manager, dryRun = opts.dry_run and "All" }, obj)
end

-- update(obj): a PUT with obj's resourceVersion; a stale one is a Conflict.
function client:update(obj, opts)
  opts = opts or {}
  local path, err = write_path(self, obj, true)
  if not path then return nil, err end
  return call("PUT", path .. query { fieldManager = opts.field_manager }, obj)
end

-- update_status(obj): a PUT of the status subresource.
function client:update_status(obj, opts)
  opts = opts or {}
  local path, err = write_path(self, obj, true, "status")
  if not path then return nil, err end
  return call("PUT", path .. query { fieldManager = opts.field_manager }, obj)
end

local patch_types = {
  merge = "application/merge-patch+json",
  json = "application/json-patch+json",
  strategic = "application/strategic-merge-patch+json",
}

-- patch(kind, name_or_req, patch [, opts]): opts.type merge (default), json
-- or strategic (built-in kinds); opts.namespace; opts.status to patch /status.
function client:patch(kind, name_or_req, patch, opts)
  opts = opts or {}
  local name, ns = name_ns(name_or_req, opts.namespace)
  if type(name) ~= "string" or name == "" then error("patch needs a name", 2) end
  local ctype = patch_types[opts.type or "merge"]
  if not ctype then error(("unknown patch type %q: merge, json or strategic"):format(opts.type), 2) end
  local r, err = self:resolve(kind)
  if not r then return nil, err end
  local path = collection(r, self:namespace_of(r, ns)) .. "/" .. escape(name)
  if opts.status then path = path .. "/status" end
  return call("PATCH", path .. query { fieldManager = opts.field_manager }, patch, ctype)
end

-- apply(obj [, opts]): server-side apply as opts.field_manager (default
-- "luaop"), opts.force to take over conflicting fields, opts.status for /status.
function client:apply(obj, opts)
  opts = opts or {}
  local path, err = write_path(self, obj, true, opts.status and "status" or nil)
  if not path then return nil, err end
  return call("PATCH", path .. query { fieldManager = opts.field_manager or "luaop", force = opts.force and true },
    obj, "application/apply-patch+yaml")
end

-- delete(kind, name_or_req [, opts]): opts.namespace, opts.propagation
-- (Foreground, Background, Orphan), opts.preconditions {uid =, resourceVersion =},
-- opts.grace_period (seconds).
function client:delete(kind, name_or_req, opts)
  opts = opts or {}
  local name, ns = name_ns(name_or_req, opts.namespace)
  if type(name) ~= "string" or name == "" then error("delete needs a name", 2) end
  local r, err = self:resolve(kind)
  if not r then return nil, err end
  local body = { apiVersion = "v1", kind = "DeleteOptions" }
  body.propagationPolicy = opts.propagation
  body.preconditions = opts.preconditions
  body.gracePeriodSeconds = opts.grace_period
  return call("DELETE", collection(r, self:namespace_of(r, ns)) .. "/" .. escape(name), body)
end

-- ---- watch ---------------------------------------------------------------------------

local Watch = {}
Watch.__index = Watch

local EVENT_TYPES = { ADDED = true, MODIFIED = true, DELETED = true, BOOKMARK = true }

-- Why a decoded watch event (not an ERROR) cannot be used, or nil: an
-- unknown type, an object that is not an object, or no metadata (a name
-- too, but for a BOOKMARK).
local function malformed_event(ev)
  local typ, obj = rawget(ev, "type"), rawget(ev, "object")
  if type(typ) ~= "string" or not EVENT_TYPES[typ] then
    return ("an unknown type, %s"):format(type(typ) == "string" and ("%q"):format(typ:sub(1, 64)) or
      (typ == nil or typ == json.null) and "none" or "a " .. type(typ))
  end
  if type(obj) ~= "table" then
    return ("%s, whose object is %s"):format(typ, (obj == nil or obj == json.null) and "null" or "a " .. type(obj))
  end
  local md = rawget(obj, "metadata")
  if type(md) ~= "table" then return ("%s, whose object has no metadata"):format(typ) end
  if typ ~= "BOOKMARK" and type(rawget(md, "name")) ~= "string" then
    return ("%s, whose object has no name"):format(typ)
  end
  return nil
end

-- luaop_watch_malformed_events_total of this watch's resource: one more.
function Watch:count_malformed()
  core.metrics.series("luaop_watch_malformed_events_total", { self.gv .. "/" .. self.kind }):add()
end

-- The next event: type (ADDED, MODIFIED, DELETED, BOOKMARK), object. At the
-- end of the stream nil (a clean end: the server's timeout) or nil, err (410
-- Gone is reason "Expired" or "Gone": list again).
function Watch:next()
  local line, status, body, reason = self.raw:next()
  if not line then
    if status then
      self.err = api_error(status, body)
      if reason then -- luaop ended it: an event longer than a frame may be
        self.err.reason = reason
        self:count_malformed()
      end
      return nil, self.err
    end
    return nil
  end
  local ev, derr = decode(line)
  if type(ev) ~= "table" then
    local typ = json.peek(line, "type")
    if type(typ) == "string" and json.peek(line, "object") == nil then
      -- an event whose object does not decode: skipped, the watch goes on
      skip_undecodable(self.gv, self.kind, line, derr, "object", "metadata")
      return self:next()
    end
    -- a line that is not JSON (a garbled or cut frame): as malformed
    self:count_malformed()
    self.err = api_error(0, "malformed watch event: " .. tostring(derr))
    self.err.reason = "MalformedEvent"
    return nil, self.err
  end
  if ev.type == "ERROR" then
    local st = type(ev.object) == "table" and ev.object or {}
    self.err = api_error(tonumber(st.code) or 500, st)
    return nil, self.err
  end
  local why = malformed_event(ev)
  if why then
    -- what comes after it cannot be trusted either: the watch ends, and an
    -- informer lists again (reason "MalformedEvent")
    self:count_malformed()
    self.err = api_error(0, "malformed watch event: " .. why)
    self.err.reason = "MalformedEvent"
    return nil, self.err
  end
  return ev.type, ev.object
end

-- for type, obj in w:events() do ... end; afterwards w.err says why it ended.
function Watch:events()
  return function() return self:next() end
end

function Watch:close()
  self.raw:close()
end
Watch.__close = Watch.close

-- watch(kind [, opts]): a low-level watch. opts: namespace, all_namespaces,
-- label_selector, field_selector, resource_version, resource_version_match,
-- send_initial_events (the streaming list: the state as ADDED events, then
-- a BOOKMARK annotated k8s.io/initial-events-end), timeout (seconds, asked
-- of the server), bookmarks (default true). Returns a watch whose :next()
-- yields until an event comes; close it when done.
function client:watch(kind, opts)
  opts = opts or {}
  local r, err = self:resolve(kind)
  if not r then return nil, err end
  local ns = not opts.all_namespaces and self:namespace_of(r, opts.namespace) or nil
  local path = collection(r, ns) .. query {
    watch = true, labelSelector = opts.label_selector, fieldSelector = opts.field_selector,
    resourceVersion = opts.resource_version, resourceVersionMatch = opts.resource_version_match,
    sendInitialEvents = opts.send_initial_events, timeoutSeconds = opts.timeout,
    allowWatchBookmarks = opts.bookmarks ~= false,
  }
  -- a watch the server was asked to end after timeoutSeconds ends here
  -- too, 30 s later at most: a server or proxy that stopped sending
  -- without closing (a stall) costs that, never an informer forever
  local limit = opts.timeout and opts.timeout + client.WATCH_SLACK or nil
  return setmetatable({ raw = api.watch { path = path, timeout = limit }, gv = r.gv, kind = r.kind }, Watch)
end

-- ---- a script's view -----------------------------------------------------------------
--
-- What a script gets for a client (luaop.script): methods over a client,
-- never the client, its class or anything they hold (discovery's cache,
-- the watch's stream). Its metatable and method table are the same for
-- every view and hold only functions (no __index table), so indexing a view
-- yields a method or the client's namespace and server, never a table of
-- luaop's; what a script sets on its view stays in its view. A watch is
-- such a handle too. Each method finds its client by its own self (a view
-- a script made up finds none and raises).
local viewed = setmetatable({}, { __mode = "k" }) -- view -> client, watch handle -> watch
-- A script's quota of open watches, shared by its views ({open =, max =}):
-- view -> quota; a watch handle still counted -> quota.
local quotas = setmetatable({}, { __mode = "k" })
local counted = setmetatable({}, { __mode = "k" })

-- A watch handle stops counting against its script's quota: closed, ended
-- or collected (whichever comes first; once).
local function uncount(h)
  local q = counted[h]
  if q then
    counted[h] = nil
    q.open = q.open - 1
  end
end

local function target(self, what)
  local t = viewed[self]
  if t == nil then error(("call it as %s:method(...)"):format(what), 3) end
  return t
end

local watch_methods = {}
function watch_methods.next(self)
  local t, o = target(self, "watch"):next()
  rawset(self, "err", target(self, "watch").err)
  if t == nil then uncount(self) end -- its stream is over
  return t, o
end
function watch_methods.events(self)
  target(self, "watch")
  return function() return watch_methods.next(self) end
end
function watch_methods.close(self)
  target(self, "watch"):close()
  uncount(self)
end
local watch_mt = {
  __index = watch_methods,
  __close = function(self)
    local w = viewed[self]
    if w then w:close() end
    uncount(self)
  end,
  __gc = uncount, -- (its stream is closed by its own finalizer)
  __metatable = false,
}

local view_methods = {}
for _, verb in ipairs { "get", "list", "create", "update", "update_status", "patch", "apply", "delete" } do
  local f = client[verb]
  view_methods[verb] = function(self, ...) return f(target(self, "client"), ...) end
end
function view_methods.watch(self, ...)
  local c = target(self, "client")
  local q = quotas[self]
  if q and q.open >= q.max then
    error(("%d watches of this script are open, the most it may have: close one (w:close()) before opening another")
      :format(q.max), 2)
  end
  local w, err = client.watch(c, ...)
  if not w then return nil, err end
  local h = setmetatable({}, watch_mt)
  viewed[h] = w
  if q then
    q.open = q.open + 1
    counted[h] = q
  end
  return h
end
-- fields a view reads from its client: strings
local view_fields = { namespace = true, server = true }
local view_mt = {
  __index = function(self, k)
    local m = view_methods[k]
    if m ~= nil then return m end
    if view_fields[k] then
      local v = rawget(viewed[self] or {}, k)
      if type(v) == "string" then return v end
    end
    return nil
  end,
  __metatable = false,
}

-- A new view of client c. quota: {open = 0, max = N}, shared by every view
-- of one script: at most max of its watches open at once (nil: no cap).
function client.view(c, quota)
  local v = setmetatable({}, view_mt)
  viewed[v] = c
  quotas[v] = quota
  return v
end

-- ---- the client --------------------------------------------------------------------

local default

-- The client for the API server luaop was started against.
function client.new(opts)
  opts = opts or {}
  local info = api.info()
  return setmetatable({ namespace = opts.namespace or info.namespace, server = info.server }, client)
end

function client.default()
  default = default or client.new()
  return default
end

-- Forget discovery and the default client (specs, the test kit).
function client.forget_discovery()
  groups, bare, default = {}, {}, nil
end

return client
