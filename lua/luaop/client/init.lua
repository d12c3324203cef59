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
local errors = require "luaop.client.errors"
local watch = require "luaop.client.watch"
local arguments = require "luaop.arguments"

local json, api = core.json, core.api
local encode, decode = json.encode, json.decode
local api_error, malformed, skip_undecodable = errors.error, errors.malformed, errors.skip_undecodable

local client = {}
-- Accept of a metadata-only list and watch (client-go's metadata client's, JSON)
local ACCEPT_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
local ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
client.__index = client

-- ---- errors (luaop.client.errors) -----------------------------------------------

client.error = errors.error
client.is_error = errors.is_error
client.error_text = errors.error_text

-- Seconds a watch asked to end after timeoutSeconds may run past it before luaop ends it.
client.WATCH_SLACK = 30

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

-- Seconds a discovery request may take (client-go's discovery client: 32).
client.DISCOVERY_TIMEOUT = 32

local function load_gv(gv)
  local list, err = call("GET", gv_path(gv), nil, nil, client.DISCOVERY_TIMEOUT)
  if not list then
    if err.code == 404 then
      groups[gv] = false
      return false
    end
    return nil, err
  end
  local bad = errors.bad_resources(list)
  if bad then return nil, errors.unusable(200, "MalformedDiscovery", bad) end
  local kinds = {}
  for _, r in ipairs(list.resources) do
    if not r.name:find("/", 1, true) then
      kinds[r.kind] = { gv = gv, kind = r.kind, resource = r.name, namespaced = r.namespaced }
    end
  end
  groups[gv] = { kinds = kinds }
  return groups[gv]
end

-- The resource of kind in gv | nil (none) | nil, err. With refresh, a cached group
-- version without the kind is loaded again, unless `fresh` says this lookup did.
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
  local list, err = call("GET", "/apis", nil, nil, client.DISCOVERY_TIMEOUT)
  if not list then return nil, err end
  local out = {}
  for _, g in ipairs(type(list) == "table" and type(list.groups) == "table" and list.groups or {}) do
    local pv = type(g) == "table" and g.preferredVersion
    local gv = type(pv) == "table" and pv.groupVersion
    if type(gv) ~= "string" or not gv:find("^[^/]+/[^/]+$") then
      return nil, errors.unusable(200, "MalformedDiscovery", "a group list with a group that has no preferred version")
    end
    out[#out + 1] = gv
  end
  return out
end

-- ---- kinds, as a script writes them -----------------------------------------------

client.KIND_FORMS, client.bad_kind, client.bad_object_kind = errors.KIND_FORMS, errors.bad_kind, errors.bad_object_kind

-- Raise what is wrong with kind, if anything, at the level given (the
-- caller of a client's method), after the call's form.
local function check_kind(form, kind, level)
  local bad = client.bad_kind(kind)
  if bad then error(form .. ": " .. bad, level + 1) end
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
  check_kind("client:resolve(kind)", spec, 2)
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
  return nil, errors.of {
    code = 404, reason = "NotFound",
    message = ("the server has no resource for kind %s%s"):format(gv and gv .. "/" or "", kind),
  }
end

-- What discovery has seen already, never asking the server (code that
-- must not wait): the resolution of spec, else nil and every kind of the
-- group versions loaded, each "gv/Kind" (sorted).
function client:resolve_seen(spec)
  check_kind("client:resolve_seen(kind)", spec, 2)
  local gv, kind = split_kind(spec)
  if not gv and bare[kind] then return bare[kind] end
  local seen = {}
  for g, v in pairs(groups) do
    if v and v.kinds[kind] and (g == gv or not gv) then return v.kinds[kind] end
    for k in pairs(v and v.kinds or {}) do seen[#seen + 1] = g .. "/" .. k end
  end
  table.sort(seen)
  return nil, seen
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

-- Kind spec and namespace/name of an object. (Called by write_path,
-- called by a client's method: level 4 is that method's caller.)
local function object_ref(obj, verb)
  local bad = arguments.bad_object(verb, obj, nil, "client")
  if bad then error(bad, 4) end
  local md = obj.metadata or {}
  return obj.apiVersion .. "/" .. obj.kind, md.namespace, md.name
end

-- name_or_req: a name, or a request {namespace =, name =}; raises at the
-- line of the method's caller (level 3) when it is neither
local function name_ns(form, name_or_req, ns)
  local name, rns = arguments.request(form, name_or_req, ns)
  if not name then error(rns, 3) end
  return name, rns
end

-- ---- verbs ---------------------------------------------------------------------------

-- get(kind, name [, namespace]) or get(kind, {namespace =, name =})
function client:get(kind, name_or_req, ns)
  check_kind("client:get(kind, name_or_req [, namespace])", kind, 2)
  local name
  name, ns = name_ns("client:get(kind, name_or_req [, namespace])", name_or_req, ns)
  local r, err = self:resolve(kind)
  if not r then return nil, err end
  return call("GET", collection(r, self:namespace_of(r, ns)) .. "/" .. escape(name))
end

-- A LIST page's text decoded: page, nil, texts (opts.texts) | nil, err; items that do not
-- decode left out, logged, counted; with opts.shard, those outside its ranges (counted).
local function decode_page(text, r, opts, head)
  local page, texts, skipped, dropped, err
  if opts.texts then
    page, texts, skipped, dropped = json.page_texts(text, opts.cut, head, opts.shard)
    if not page then return nil, texts end
  else
    if not opts.shard then page, err = decode(text) end -- (whole: the common case)
    if page then return page end
    page, skipped, dropped = json.decode_page(text, "items", opts.shard)
    if not page then return nil, err or skipped end
  end
  if opts.shard then watch.filtered(r.gv, r.kind, dropped) end
  for _, s in ipairs(skipped) do skip_undecodable(r.gv, r.kind, s.text, s.error, "metadata") end
  return page, nil, texts
end

-- list(kind [, opts]): opts.namespace (default the client's), opts.all_namespaces,
-- opts.label_selector, opts.field_selector, opts.shard_selector (KEP-5866's
-- shardSelector: luaop.shard.ranges), opts.limit (page size, default 500),
-- opts.timeout (seconds for each page, retries included; default none),
-- opts.shard (hash ranges, luaop.shard.ranges: items whose namespace is
-- certainly outside them are left out before they are decoded, as the
-- server does with a shardSelector), opts.metadata_only (each item's
-- metadata alone, as PartialObjectMetadata). Pages through continue tokens;
-- returns the list with every item. With opts.each_page(items, texts), hands over each
-- page's items instead; with opts.texts too, each decoded shallow and its text as a cache
-- keeps it (json.page_texts; opts.cut). The next page is asked for before this one is decoded.
function client:list(kind, opts)
  check_kind("client:list(kind [, opts])", kind, 2)
  opts = opts or {}
  local r, err = self:resolve(kind)
  if not r then return nil, err end
  local ns = not opts.all_namespaces and self:namespace_of(r, opts.namespace) or nil
  local path = collection(r, ns)
  local accept = opts.metadata_only and ACCEPT_METADATA_LIST or nil
  local head = opts.texts and not opts.metadata_only and -- (the apiVersion and kind items lack)
    ('{"apiVersion":%s,"kind":%s'):format(json.encode(r.gv), json.encode(r.kind)) or nil
  local function start(continue)
    return api.start { method = "GET", timeout = opts.timeout, accept = accept, path = path .. query {
      labelSelector = opts.label_selector, fieldSelector = opts.field_selector,
      shardSelector = opts.shard_selector, limit = opts.limit or 500, continue = continue,
    } }
  end
  local items, pending = json.array(), start(nil)
  local list -- the last page
  local tokens = {} -- the continue tokens seen: one again would be a loop
  repeat
    local text, status = answer(pending:wait())
    if not text then return nil, status end
    local md, perr = json.peek(text, "metadata")
    local page, derr, texts
    if not perr then
      local continue = type(md) == "table" and md["continue"]
      if type(continue) == "string" and continue ~= "" then
        if tokens[continue] then return nil, errors.unusable(status, "MalformedList", "a continue token again") end
        tokens[continue] = true
      end
      pending = type(continue) == "string" and continue ~= "" and start(continue) or nil
      page, derr, texts = decode_page(text, r, opts, head)
    end
    -- let the page's text be collected while its items are handled (the nil is never read)
    text = nil -- luacheck: ignore 311
    if page == nil then
      if pending then pending:cancel() end
      return nil, malformed(status, perr or derr)
    end
    local bad = errors.bad_page(page, ns, not pending)
    if bad then
      if pending then pending:cancel() end
      return nil, errors.unusable(status, "MalformedList", bad)
    end
    for _, item in ipairs(page.items) do
      -- Items of a list carry no apiVersion/kind: give them theirs.
      item.apiVersion = item.apiVersion or (opts.metadata_only and "meta.k8s.io/v1" or r.gv)
      item.kind = item.kind or (opts.metadata_only and "PartialObjectMetadata" or r.kind)
      if not opts.each_page then items[#items + 1] = item end
    end
    if opts.each_page then
      -- the next page is not wanted when this one's handler raises
      local ok, herr = pcall(opts.each_page, page.items, texts)
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

local function write_path(self, obj, with_name, sub, verb)
  local kind, ns, name = object_ref(obj, verb)
  local r, err = self:resolve(kind)
  if not r then return nil, err end
  if r.namespaced and obj.metadata then obj.metadata.namespace = ns or self.namespace end
  local path = collection(r, self:namespace_of(r, ns))
  if with_name then path = path .. "/" .. escape(name) end -- (object_ref refused one with no name)
  return path .. (sub and "/" .. sub or "")
end

-- create(obj [, opts]): opts.field_manager, opts.dry_run
function client:create(obj, opts)
  opts = opts or {}
  local path, err = write_path(self, obj, false, nil, "create")
  if not path then return nil, err end
  return call("POST", path .. query { fieldManager = opts.field_manager, dryRun = opts.dry_run and "All" }, obj)
end

-- update(obj): a PUT with obj's resourceVersion; a stale one is a Conflict.
function client:update(obj, opts)
  opts = opts or {}
  local path, err = write_path(self, obj, true, nil, "update")
  if not path then return nil, err end
  return call("PUT", path .. query { fieldManager = opts.field_manager }, obj)
end

-- update_status(obj): a PUT of the status subresource.
function client:update_status(obj, opts)
  opts = opts or {}
  local path, err = write_path(self, obj, true, "status", "update_status")
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
  check_kind("client:patch(kind, name_or_req, patch [, opts])", kind, 2)
  opts = opts or {}
  local name, ns = name_ns("client:patch(kind, name_or_req, patch [, opts])", name_or_req, opts.namespace)
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
  local path, err = write_path(self, obj, true, opts.status and "status" or nil, "apply")
  if not path then return nil, err end
  return call("PATCH", path .. query { fieldManager = opts.field_manager or "luaop", force = opts.force and true },
    obj, "application/apply-patch+yaml")
end

-- delete(kind, name_or_req [, opts]): opts.namespace, opts.propagation
-- (Foreground, Background, Orphan), opts.preconditions {uid =, resourceVersion =},
-- opts.grace_period (seconds).
function client:delete(kind, name_or_req, opts)
  check_kind("client:delete(kind, name_or_req [, opts])", kind, 2)
  opts = opts or {}
  local name, ns = name_ns("client:delete(kind, name_or_req [, opts])", name_or_req, opts.namespace)
  local r, err = self:resolve(kind)
  if not r then return nil, err end
  local body = { apiVersion = "v1", kind = "DeleteOptions" }
  body.propagationPolicy = opts.propagation
  body.preconditions = opts.preconditions
  body.gracePeriodSeconds = opts.grace_period
  return call("DELETE", collection(r, self:namespace_of(r, ns)) .. "/" .. escape(name), body)
end

-- The first page of a list (opts as list's, limit default 1), decoded,
-- continue token and all: a probe of what the server makes of a query
-- (luaop.informer.shard: whether it echoes a shardSelector).
function client:first_page(kind, opts)
  opts = opts or {}
  local r, err = self:resolve(kind)
  if not r then return nil, err end
  local ns = not opts.all_namespaces and self:namespace_of(r, opts.namespace) or nil
  return call("GET", collection(r, ns) .. query { labelSelector = opts.label_selector,
    fieldSelector = opts.field_selector, shardSelector = opts.shard_selector, limit = opts.limit or 1 }, nil, nil,
    opts.timeout)
end

-- ---- watch (luaop.client.watch) ----------------------------------------------------

-- watch(kind [, opts]): a low-level watch. opts: namespace, all_namespaces,
-- label_selector, field_selector, shard_selector, resource_version,
-- resource_version_match,
-- send_initial_events (the streaming list: the state as ADDED events, then
-- a BOOKMARK annotated k8s.io/initial-events-end), timeout (seconds, asked
-- of the server), bookmarks (default true), shard (as list's: the events of
-- objects certainly outside the ranges left out before they are decoded),
-- metadata_only (as list's), cut (json.cut: what each text keeps), shallow (luaop.client.watch);
-- list: a LIST instead, unpaged, its items as ADDED events as they arrive, then a LIST event (its
-- metadata). Returns a watch whose :next() yields until an event comes; close it when done.
function client:watch(kind, opts)
  check_kind("client:watch(kind [, opts])", kind, 2)
  opts = opts or {}
  local r, err = self:resolve(kind)
  if not r then return nil, err end
  local ns, list = not opts.all_namespaces and self:namespace_of(r, opts.namespace) or nil, opts.list
  local path = collection(r, ns) .. query {
    watch = not list, labelSelector = opts.label_selector, fieldSelector = opts.field_selector,
    shardSelector = opts.shard_selector, resourceVersion = opts.resource_version,
    resourceVersionMatch = opts.resource_version_match, sendInitialEvents = opts.send_initial_events,
    timeoutSeconds = not list and opts.timeout, allowWatchBookmarks = not list and opts.bookmarks ~= false,
  }
  -- a watch the server was asked to end after timeoutSeconds ends here
  -- too, 30 s later at most: a server or proxy that stopped sending
  -- without closing (a stall) costs that, never an informer forever
  local limit = opts.timeout and opts.timeout + (list and 0 or client.WATCH_SLACK) or nil
  local accept = opts.metadata_only and (list and ACCEPT_METADATA_LIST or ACCEPT_METADATA) or nil
  return watch.open(path, limit, r.gv, r.kind, ns, opts.shard, accept, opts.cut, opts.shallow, list and
    (opts.metadata_only and "" or ('"apiVersion":%s,"kind":%s'):format(json.encode(r.gv), json.encode(r.kind))))
end

-- ---- the client --------------------------------------------------------------------

local default -- the client for the API server luaop was started against

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
