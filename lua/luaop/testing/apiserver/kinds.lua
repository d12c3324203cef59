-- luaop.testing.apiserver.kinds - the kinds served (built-in and from CRDs), discovery,
-- and paths to kinds; a part of luaop.testing.apiserver.
local core = require "luaop.core"
local discovery = require "luaop.discovery"
local json = core.json
local array, encode = json.array, json.encode
local values_part = require "luaop.testing.apiserver.values"
local copy, has, nonempty, without = values_part.copy, values_part.has, values_part.nonempty, values_part.without
local builtin_part = require "luaop.testing.apiserver.builtin"
local status_part = require "luaop.testing.apiserver.status"
local path_not_found = status_part.path_not_found

local Server = {} -- methods of the server (luaop.testing.apiserver)

-- ---- kinds and discovery ---------------------------------------------------------------

local VERBS = { "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch" }

-- What kinds' records share (never changed): no field paths, the default
-- field selectors, a set of verbs for each list of them.
local NO_PATHS = {}
local DEFAULT_FIELDS = { ["metadata.name"] = true, ["metadata.namespace"] = true }
local verb_sets = {}
local function verb_set(verbs)
  local key = table.concat(verbs, " ")
  local set = verb_sets[key]
  if not set then
    set = {}
    for _, v in ipairs(verbs) do set[v] = true end
    verb_sets[key] = set
  end
  return set
end

-- Kubernetes' version order: GA before beta before alpha, higher first;
-- other names last, alphabetically.
local function version_rank(v)
  local major, stage, minor = v:match("^v(%d+)(%l*)(%d*)$")
  local s = stage == "" and minor == "" and 3 or stage == "beta" and 2 or stage == "alpha" and 1
  if not major or not s or (stage ~= "" and minor == "") then return 0, 0, 0 end
  return s, tonumber(major), tonumber(minor) or 0
end

local function version_before(a, b)
  local sa, ma, na = version_rank(a)
  local sb, mb, nb = version_rank(b)
  if sa ~= sb then return sa > sb end
  if ma ~= mb then return ma > mb end
  if na ~= nb then return na > nb end
  return a < b
end

local DEFAULT_NAMESPACES = { "default", "kube-system", "kube-public", "kube-node-lease" }
-- NamespaceLifecycle refuses to delete these.
local IMMORTAL = { default = true, ["kube-system"] = true, ["kube-public"] = true }

local CRD_STORE = "apiextensions.k8s.io/customresourcedefinitions"

-- Register a kind (see the header). Re-adding a version's resource replaces it.
-- Extra fields: list_kind, singular, short_names, field_labels (every
-- field selector it takes; default metadata.name and metadata.namespace),
-- custom (a custom resource: no strategic merge patch, no unconditional
-- update), status_on_create ("keep", or the status a create starts with;
-- default: none), name_rule ("subdomain", "label", "dns1035", "path"), return_deleted
-- (a DELETE answers with the object rather than a Status, as for Pods),
-- no_generation (the API server's strategy keeps no metadata.generation:
-- a ConfigMap's, a Secret's), verbs (those discovery lists; default all
-- eight; a request for another is 405 MethodNotAllowed).
function Server:add_kind(spec)
  if type(spec) ~= "table" then error("add_kind needs a table", 2) end
  for _, f in ipairs { "version", "kind", "resource" } do
    if not nonempty(spec[f]) then error("add_kind needs " .. f, 2) end
  end
  local k = {
    group = spec.group or "", version = spec.version, kind = spec.kind, resource = spec.resource,
    namespaced = spec.namespaced ~= false, status = spec.status and true or false,
    list_kind = spec.list_kind or spec.kind .. "List", singular = spec.singular or spec.kind:lower(),
    short_names = spec.short_names, custom = spec.custom and true or false,
    status_on_create = spec.status_on_create, prepare = spec.prepare, keep_on_update = spec.keep_on_update,
    name_rule = spec.name_rule or "subdomain", field_paths = spec.field_paths or NO_PATHS, crd = spec.crd,
    return_deleted = spec.return_deleted and true or false, verbs = spec.verbs or VERBS,
    no_generation = spec.no_generation and true or false, schema = spec.schema, -- (a CRD version's: prune.lua)
  }
  k.verb_set = verb_set(k.verbs)
  k.gv = k.group == "" and k.version or k.group .. "/" .. k.version
  k.store = k.group .. "/" .. k.resource
  k.unconditional = spec.unconditional_update
  if k.unconditional == nil then k.unconditional = not k.custom end
  k.strategic = spec.strategic
  if k.strategic == nil then k.strategic = not k.custom end
  k.field_labels, k.field_style = DEFAULT_FIELDS, spec.field_labels and "custom" or "default"
  if spec.field_labels then
    k.field_labels = {}
    for _, f in ipairs(spec.field_labels) do k.field_labels[f] = true end
  end
  self:_install_kind(k)
end

-- What resolve_kind and _kind found since the served kinds last changed
-- (specs name the same few kinds again and again): forgotten at a change.
function Server:_kinds_changed()
  self.resolved, self.kind_memo = {}, {}
end

-- The built-in kinds (luaop.testing.apiserver.builtin), made once per
-- process: records nothing changes, and group versions and groups every
-- server shares until it changes one (own_gv, own_group).
local builtin

-- Server s's own, changeable, group version or group `name`: a shared
-- built-in one is copied first. nil when s serves none.
local function own_gv(s, name)
  local gv = s.gvs[name]
  if gv and s ~= builtin and builtin.gvs[name] == gv then
    local kinds = {}
    for res, k in pairs(gv.kinds) do kinds[res] = k end
    gv = { group = gv.group, version = gv.version, gv = gv.gv, kinds = kinds,
      order = table.move(gv.order, 1, #gv.order, 1, {}) }
    s.gvs[name] = gv
  end
  return gv
end
local function own_group(s, name)
  local g = s.groups[name]
  if g and s ~= builtin and builtin.groups[name] == g then
    g = { name = g.name, versions = table.move(g.versions, 1, #g.versions, 1, {}) }
    s.groups[name] = g
  end
  return g
end

-- Serve kind record k (add_kind's), in its group version.
function Server:_install_kind(k)
  self:_kinds_changed()
  local gv = own_gv(self, k.gv)
  if not gv then
    gv = { group = k.group, version = k.version, gv = k.gv, kinds = {}, order = {} }
    self.gvs[k.gv] = gv
    if k.group ~= "" then
      local g = own_group(self, k.group)
      if not g then
        g = { name = k.group, versions = {} }
        self.groups[k.group] = g
        self.group_order[#self.group_order + 1] = k.group
      end
      g.versions[#g.versions + 1] = k.version
      table.sort(g.versions, version_before)
    end
  end
  if not gv.kinds[k.resource] then gv.order[#gv.order + 1] = k.resource end
  gv.kinds[k.resource] = k
  gv.text = nil -- (its discovery text: gv_text)
  self.store_kind[k.store] = self.store_kind[k.store] or k
end

-- Serve the built-in kinds: their group versions and groups shared with
-- every other server until one is changed; a store is made when first
-- used (M.new's stores).
function Server:_add_builtin()
  self:_kinds_changed()
  if not builtin then
    builtin = setmetatable({ gvs = {}, groups = {}, group_order = {}, stores = {}, store_kind = {} },
      { __index = Server })
    for _, spec in ipairs(builtin_part.SPECS) do builtin:add_kind(spec) end
  end
  for name, gv in pairs(builtin.gvs) do self.gvs[name] = gv end
  for name, g in pairs(builtin.groups) do self.groups[name] = g end
  table.move(builtin.group_order, 1, #builtin.group_order, #self.group_order + 1, self.group_order)
  for store, k in pairs(builtin.store_kind) do self.store_kind[store] = k end
end

-- Take a group version's kind away (its CRD went).
function Server:_remove_kind(k)
  local gv = self.gvs[k.gv]
  if not gv or gv.kinds[k.resource] ~= k then return end
  self:_kinds_changed()
  gv = own_gv(self, k.gv)
  gv.text = nil
  gv.kinds[k.resource] = nil
  gv.order = without(gv.order, k.resource)
  if #gv.order > 0 then return end
  self.gvs[k.gv] = nil
  local g = own_group(self, k.group)
  if g then
    g.versions = without(g.versions, k.version)
    if #g.versions == 0 then
      self.groups[k.group] = nil
      self.group_order = without(self.group_order, k.group)
    end
  end
end

local function resource_list(gv)
  local resources = array()
  for _, name in ipairs(gv.order) do
    local k = gv.kinds[name]
    resources[#resources + 1] = { name = k.resource, singularName = k.singular, namespaced = k.namespaced,
      kind = k.kind, verbs = array(copy(k.verbs)), shortNames = k.short_names and array(copy(k.short_names)) }
    if k.status then
      resources[#resources + 1] = { name = k.resource .. "/status", singularName = "", namespaced = k.namespaced,
        kind = k.kind, verbs = array { "get", "patch", "update" } }
    end
  end
  return { kind = "APIResourceList", apiVersion = "v1", groupVersion = gv.gv, resources = resources }
end

-- A group version's discovery document as text, written once: a built-in
-- group version no server changed is every server's, and so is its text
-- (every test's client asks for /api/v1 again: 40% of the kit's discovery
-- bytes).
local function gv_text(gv)
  gv.text = gv.text or encode(resource_list(gv))
  return gv.text
end

local function api_group(g)
  local versions = array()
  for _, v in ipairs(g.versions) do versions[#versions + 1] = { groupVersion = g.name .. "/" .. v, version = v } end
  return { kind = "APIGroup", apiVersion = "v1", name = g.name, versions = versions, preferredVersion = versions[1] }
end

function Server:_discovery(segs)
  if segs[1] == "version" and #segs == 1 then
    -- the version luaop.discovery was read from (vMAJOR.MINOR.PATCH)
    local major, minor = discovery.kubernetes:match "^v(%d+)%.(%d+)%."
    return { major = major, minor = minor, gitVersion = discovery.kubernetes .. "-luaop.apiserver",
      platform = "linux/amd64" }
  elseif segs[1] == "api" and #segs == 1 then
    return { kind = "APIVersions", versions = array { "v1" } }
  elseif segs[1] == "apis" and #segs == 1 then
    local groups = array()
    for _, name in ipairs(self.group_order) do
      local g = api_group(self.groups[name])
      g.kind, g.apiVersion = nil, nil
      groups[#groups + 1] = g
    end
    return { kind = "APIGroupList", apiVersion = "v1", groups = groups }
  elseif segs[1] == "apis" and #segs == 2 then
    return self.groups[segs[2]] and api_group(self.groups[segs[2]])
  end
  local gv
  if segs[1] == "api" and #segs == 2 then gv = segs[2] end
  if segs[1] == "apis" and #segs == 3 then gv = segs[2] .. "/" .. segs[3] end
  return gv and self.gvs[gv] and gv_text(self.gvs[gv])
end

-- ---- a kind by its name, as scripts and tests give it --------------------------------

local KINDS_DOC = "docs/testing.md#kinds-the-kit-serves"

-- Levenshtein's distance between two short strings.
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur, ca = { [0] = i }, a:byte(i)
    for j = 1, #b do
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca == b:byte(j) and 0 or 1))
    end
    prev = cur
  end
  return prev[#b]
end

-- The group versions a bare Kind is looked for in, in order, as luaop's
-- client does: the core group, then each group's preferred version.
function Server:_bare_order()
  local out = { "v1" }
  for _, name in ipairs(self.group_order) do out[#out + 1] = name .. "/" .. self.groups[name].versions[1] end
  return out
end

local function find(gv, kind)
  for _, res in ipairs(gv and gv.order or {}) do
    if gv.kinds[res].kind == kind then return gv.kinds[res] end
  end
end

-- How close kind k is to what was asked for (lower is closer) | nil: too far.
local function closeness(k, gv, kind, preferred)
  local lkind, lk = kind:lower(), k.kind:lower()
  local score
  if k.kind == kind then
    score = 0 -- the right kind in another group version
  elseif lkind == lk or lkind == k.resource or lkind == k.singular or has(k.short_names, lkind)
    or lkind == k.resource .. "." .. k.group then
    score = 1 -- another case, the plural, a short name
  elseif math.abs(#lkind - #lk) <= 2 then
    local d = distance(lkind, lk)
    if d <= (#lk >= 6 and 2 or 1) then score = 1 + d end
  end
  if not score then return nil end
  if gv and k.gv ~= gv then score = score + 0.5 end
  if not preferred then score = score + 0.25 end
  return score
end

-- The served kind closest to gv (or nil) and kind, as it would be spelt | nil.
function Server:_closest_kind(gv, kind)
  local best, best_score
  for _, gvname in ipairs(self:_gv_order()) do
    local g = self.gvs[gvname]
    local group = g.group ~= "" and self.groups[g.group]
    local preferred = not group or group.versions[1] == g.version
    for _, res in ipairs(g.order) do
      local k = g.kinds[res]
      local score = closeness(k, gv, kind, preferred)
      if score and (not best or score < best_score) then best, best_score = k, score end
    end
  end
  if not best then return nil end
  if not gv then
    for _, name in ipairs(self:_bare_order()) do
      local k = find(self.gvs[name], best.kind)
      if k then
        if k == best then return best.kind end
        break
      end
    end
  end
  return best.gv .. "/" .. best.kind
end

-- The kind a script or a test names: "Kind" (the core group, then each
-- group's preferred version, as luaop's client looks), "v1/Kind" or
-- "group/version/Kind". Returns its record (add_kind's; read it, never
-- change it), or nil and a message that names it, says the kit does not
-- serve it, offers the closest served kind and points at the list of those
-- served. Custom resources count once their CRD is in.
function Server:resolve_kind(spec)
  -- (what it found since the served kinds last changed: _kinds_changed)
  local memo = self.resolved
  if memo and memo[spec] then return memo[spec] end
  local k, message = self:_resolve_kind(spec)
  if k and memo then memo[spec] = k end
  return k, message
end

function Server:_resolve_kind(spec)
  if type(spec) ~= "string" or spec == "" then
    return nil, ("a kind is required (Kind, version/Kind or group/version/Kind), got %s"):format(
      type(spec) == "string" and '""' or tostring(spec))
  end
  local parts = {}
  for p in spec:gmatch("[^/]+") do parts[#parts + 1] = p end
  local gv, kind
  if #parts == 1 then
    kind = parts[1]
  elseif #parts == 2 then
    gv, kind = parts[1], parts[2]
  elseif #parts == 3 then
    gv, kind = parts[1] .. "/" .. parts[2], parts[3]
  else
    return nil, ("bad kind %q: want Kind, version/Kind or group/version/Kind"):format(spec)
  end
  if gv then
    local k = find(self.gvs[gv], kind)
    if k then return k end
  else
    for _, name in ipairs(self:_bare_order()) do
      local k = find(self.gvs[name], kind)
      if k then return k end
    end
  end
  local why = ""
  for _, r in ipairs(builtin_part.LEFT_OUT) do
    if r.kind == kind and (not gv or gv == (r.group == "" and r.version or r.group .. "/" .. r.version)) then
      why = (" (%s is virtual: the API server answers it and stores nothing, verbs %s)"):format(kind,
        table.concat(r.verbs, ", "))
    end
  end
  local close = self:_closest_kind(gv, kind)
  return nil, ('the test kit\'s API server does not serve kind "%s"%s.%s The kinds it serves are listed in %s '
    .. "(and a CRD's kinds once a test installs it)."):format(spec, why,
    close and (' Did you mean "%s"?'):format(close) or "", KINDS_DOC)
end

-- ---- paths ---------------------------------------------------------------------------

local function unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

local function split_path(path)
  local p, q = path:match("^([^?]*)%??(.*)$")
  local segs, query = {}, {}
  for s in p:gmatch("[^/]+") do segs[#segs + 1] = unescape(s) end
  for pair in q:gmatch("[^&]+") do
    local key, value = pair:match("^([^=]*)=?(.*)$")
    key, value = unescape((key:gsub("+", " "))), unescape((value:gsub("+", " ")))
    if query[key] == nil then query[key] = value end
  end
  return segs, query
end

-- A resource path: {k, namespace, name, sub} | {discovery = value} | nil, failure.
function Server:_route(segs)
  local gv, rest
  if segs[1] == "api" and #segs >= 3 then
    gv, rest = segs[2], table.move(segs, 3, #segs, 1, {})
  elseif segs[1] == "apis" and #segs >= 4 then
    gv, rest = segs[2] .. "/" .. segs[3], table.move(segs, 4, #segs, 1, {})
  else
    local d = self:_discovery(segs)
    if d then return { discovery = d } end
    return nil, path_not_found()
  end
  local g = self.gvs[gv]
  if not g then
    local d = self:_discovery(segs)
    if d then return { discovery = d } end
    return nil, path_not_found()
  end
  -- /namespaces/<ns>/<resource>..., but /namespaces/<name>/status is the namespace's own
  local ns
  if rest[1] == "namespaces" and #rest >= 3 and rest[3] ~= "status" and rest[3] ~= "finalize" then
    ns = rest[2]
    rest = table.move(rest, 3, #rest, 1, {})
  end
  local k = g.kinds[rest[1]]
  if not k or #rest > 3 or (ns and not k.namespaced) then return nil, path_not_found() end
  local name, sub = rest[2], rest[3]
  if sub and not (sub == "status" and k.status) then return nil, path_not_found() end
  if name and k.namespaced and not ns then return nil, path_not_found() end
  return { k = k, namespace = ns, name = name, sub = sub }
end

return {
  BUILTIN = builtin_part.SPECS, CRD_STORE = CRD_STORE, DEFAULT_NAMESPACES = DEFAULT_NAMESPACES, IMMORTAL = IMMORTAL,
  split_path = split_path, methods = Server,
}
