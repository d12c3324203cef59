-- luaop.arguments - what is wrong with the arguments of ctx's methods:
-- each check answers a message naming the call's form, what it wants and
-- what it was given, which the method raises at the script's line (level
-- 2), so that misuse is never a NotFound from the API server or a line of
-- luaop's own.
local client = require "luaop.client.errors" -- (bad_kind, bad_object_kind: the client requires this module)
local nearest = require "luaop.nearest"
local shown = client.shown

local M = {}

-- The first key of t (in byte order, so the message is the same every run)
-- that is none of the names given, or nil.
local function unknown_key(t, ...)
  local known, extra = { ... }, nil
  for k in pairs(t) do
    local ok = false
    for _, n in ipairs(known) do ok = ok or k == n end
    if not ok then
      local s = type(k) == "string" and k or "[" .. shown(k) .. "]"
      if not extra or s < extra then extra = s end
    end
  end
  return extra
end

-- " (did you mean NAME?)" when a name is near word, else "".
local function did_you_mean(word, names)
  local near = nearest(word, names)
  return near and (" (did you mean %s?)"):format(near) or ""
end

-- Misuse raises at the script's line: these checks answer what is wrong
-- (saying what was given), which the method raises at level 2.
function M.misuse(form, what, got)
  return ("%s: %s, got %s"):format(form, what, shown(got))
end
local misuse = M.misuse

-- (not a string; or not Kind, version/Kind or group/version/Kind)
local function bad_kind(form, kind)
  local bad = client.bad_kind(kind)
  if bad then return form .. ": " .. bad end
end

-- The object a (kind, req_or_name [, namespace] [, opts]) call names: its
-- name and its namespace (nil when none is said; "" is none), said by the
-- request, the namespace argument or opts.namespace, which must agree.
-- nil and what is wrong when something is.
function M.target(form, kind, req, ns, opts)
  local bad = bad_kind(form, kind)
  if bad then return nil, bad end
  return M.request(form, req, ns, opts)
end

-- The same for a call whose kind is checked apart (the client's).
function M.request(form, req, ns, opts)
  local name, rns
  if type(req) == "table" then
    name, rns = req.name, req.namespace
    local extra = unknown_key(req, "name", "namespace")
    if extra then
      return nil, ("%s: the request has an unknown field %s%s (a request is {namespace =, name =})"):format(form,
        extra, did_you_mean(extra, { "name", "namespace" }))
    end
    if type(name) ~= "string" or name == "" then
      return nil, misuse(form, "the request's name must be a non-empty string", name)
    end
    if rns ~= nil and type(rns) ~= "string" then
      return nil, misuse(form, "the request's namespace must be a string", rns)
    end
  elseif type(req) == "string" and req ~= "" then
    name = req
  else
    return nil, misuse(form, "name_or_req must be a name or a request {namespace =, name =}", req)
  end
  if ns ~= nil and type(ns) ~= "string" then return nil, misuse(form, "namespace must be a string", ns) end
  if opts ~= nil and type(opts) ~= "table" then return nil, misuse(form, "opts must be a table", opts) end
  local ons = opts and opts.namespace
  if ons ~= nil and type(ons) ~= "string" then return nil, misuse(form, "opts.namespace must be a string", ons) end
  local out
  for _, v in ipairs { rns or "", ns or "", ons or "" } do
    if v ~= "" then
      if out and out ~= v then return nil, ("%s: two namespaces, %q and %q: say one"):format(form, out, v) end
      out = v
    end
  end
  return name, out
end

-- The type ctx:list's option k must have, nil when there is no such option.
-- (No table of them: an upvalue table of a method is one every script's ctx
-- would reach, spec/unit/reach_spec.lua.)
local function list_option(k)
  if k == "namespace" or k == "label_selector" or k == "field_selector" then return "string" end
  if k == "labels" then return "table" end
  if k == "filter" then return "function" end
  return nil
end

-- ctx:list's opts, checked: the options to list with | nil, what is wrong.
function M.list_options(kind, opts)
  local form = "ctx:list(kind [, opts])"
  local bad = bad_kind(form, kind)
  if bad then return nil, bad end
  if opts == nil then return {} end
  if type(opts) ~= "table" then return nil, misuse(form, "opts must be a table", opts) end
  for k, v in pairs(opts) do
    local want = list_option(k)
    if not want then
      local names = { "field_selector", "filter", "label_selector", "labels", "namespace" }
      local near = type(k) == "string" and nearest(k, names)
      return nil, ("%s: unknown option %s%s (options: %s)"):format(form,
        type(k) == "string" and k or "[" .. shown(k) .. "]", near and (" (did you mean %s?)"):format(near) or "",
        table.concat(names, ", "))
    end
    if type(v) ~= want then
      local hint = k == "labels" and type(v) == "string"
        and ' (a selector string such as "team=a" goes in label_selector)' or ""
      return nil, misuse(form, ("opts.%s must be a %s%s"):format(k, want, hint), v)
    end
  end
  for k, v in pairs(opts.labels or {}) do
    if type(k) ~= "string" or type(v) ~= "string" then
      return nil, ("%s: opts.labels must be {key = \"value\", ...}, all strings, got [%s] = %s"):format(form,
        shown(k), shown(v))
    end
  end
  if opts.namespace == "" then -- every namespace, as Kubernetes' NamespaceAll
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.namespace = nil
    return o
  end
  return opts
end

-- What is wrong with the object and opts of a write (who:verb(obj [, opts]),
-- who "ctx" unless said), or nil.
-- Objects a trimmed cache handed out (luaop.informer.cache): what it left
-- out is not in them, so a write of one would drop it. (Weak: gone with
-- them; never reachable from a script.)
M.trimmed = setmetatable({}, { __mode = "k" })

function M.bad_object(verb, obj, opts, who)
  local form = ("%s:%s(obj [, opts])"):format(who or "ctx", verb)
  if type(obj) ~= "table" then return misuse(form, "obj must be an object (a table)", obj) end
  if obj.kind == "PartialObjectMetadata" and obj.apiVersion == "meta.k8s.io/v1" then
    -- (a write of it would empty the object, were it taken)
    return form .. ": obj is metadata only (a PartialObjectMetadata, as a metadata-only cache holds it): it has "
      .. "no body to write; patch it by name (ctx:patch), or get the whole object from the API server (c:get)"
  end
  if M.trimmed[obj] then
    return form .. ": obj comes from a trimmed cache (trim): what the cache leaves out is not in it, and a write "
      .. "of it would drop that; patch it by name (ctx:patch), or get the whole object from the API server (c:get)"
  end
  local bad = client.bad_object_kind(obj)
  if bad then return form .. ": " .. bad end
  local md = obj.metadata
  if md ~= nil and type(md) ~= "table" then return misuse(form, "obj.metadata must be a table", md) end
  md = md or {}
  for _, k in ipairs { "name", "generateName", "namespace" } do
    if md[k] ~= nil and type(md[k]) ~= "string" then
      return misuse(form, ("obj.metadata.%s must be a string"):format(k), md[k])
    end
  end
  if verb ~= "create" and (md.name == nil or md.name == "") then
    return misuse(form, "obj.metadata.name must be the name of the object to write", md.name)
  end
  if opts ~= nil and type(opts) ~= "table" then return misuse(form, "opts must be a table", opts) end
end

return M
