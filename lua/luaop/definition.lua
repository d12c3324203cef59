-- luaop.definition - a controller's definition: its validation, its
-- budgets (cut down to the command line's limits) and what reconcile may
-- return. luaop.controller is its define, luaop.requeue_after and
-- luaop.requeue its markers.
local core = require "luaop.core"
local retry = require "luaop.retry"
local filter = require "luaop.filter"

local M = {}

-- The budgets of one reconcile, unless a definition says otherwise:
-- `instructions = N` (the default is about a second of pure Lua) and
-- `memory = bytes` or a Kubernetes quantity such as "64Mi" (net growth of
-- the Lua heap while the reconcile runs).
M.DEFAULT_INSTRUCTIONS = 100000000
M.DEFAULT_MEMORY = 64 * 1024 * 1024
-- What a definition may declare at most (--max-instructions, --max-memory):
-- more is cut down to these, with a log line saying so.
M.MAX_INSTRUCTIONS = 1000000000
M.MAX_MEMORY = 1024 * 1024 * 1024

-- bytes from an integer or a quantity ("64Mi", "500M": the grammar of
-- --max-memory, core.bytes); nil when malformed or not at least 1
local function bytes(v)
  if math.type(v) == "integer" then return v >= 1 and v or nil end
  return core.bytes(v)
end

-- Handlers a definition may have instead of reconcile: told of each add,
-- update and delete of its resource, once the caches have synced.
M.HANDLERS = { "on_add", "on_update", "on_delete" }

-- The longest a controller's name may be, in bytes (a Kubernetes name's).
M.NAME_MAX = 253

-- Definitions' metatable marks them (is_definition) and holds nothing: with
-- Definition.__index = Definition, def.__index was this table, shared by every
-- script's definitions, and a field one script set on it (memory, watches)
-- was read by the next script's definition as its own.
local Definition = {}

-- What is wrong with a kind as a definition names it ("Kind", "v1/Kind",
-- "group/version/Kind"), or nil.
local function bad_kind(spec)
  local parts = {}
  for p in (spec .. "/"):gmatch("([^/]*)/") do parts[#parts + 1] = p end
  if #parts > 3 then return "too many parts: want Kind, version/Kind or group/version/Kind" end
  local kind, version, group = parts[#parts], parts[#parts - 1], parts[#parts - 2]
  if not kind:match("^%u[%w]*$") then return ("the kind %q is not an UpperCamelCase name"):format(kind) end
  if version and not version:match("^v%d+$") and not version:match("^v%d+%l+%d+$") then
    return ("the version %q is not a Kubernetes version (v1, v1beta1, v1alpha2)"):format(version)
  end
  if group then
    for label in (group .. "."):gmatch("([^.]*)%.") do
      if #label > 63 or not (label:match("^[%l%d][%l%d%-]*$") and label:match("[%l%d]$")) then
        return ("the group %q is not a DNS subdomain"):format(group)
      end
    end
  end
  return nil
end
M.bad_kind = bad_kind

-- Where def is written: "path:line: " of its first Lua function (its
-- reconcile, else a watch's map), or "" when it has none.
local function where(def)
  local fns = { type(def) == "table" and def.reconcile }
  for _, h in ipairs(M.HANDLERS) do fns[#fns + 1] = type(def) == "table" and def[h] end
  for _, w in ipairs(type(def) == "table" and type(def.watches) == "table" and def.watches or {}) do
    fns[#fns + 1] = type(w) == "table" and w.map
  end
  for _, f in ipairs(fns) do
    if type(f) == "function" then
      local ok, line, source = pcall(core.check.line, f)
      if ok and type(source) == "string" and source:sub(1, 1) == "@" then
        return ("%s:%d: "):format(source:sub(2), line)
      end
    end
  end
  return ""
end

-- The fields a definition may have, and each watch.
M.FIELDS = { "name", "resource", "namespace", "label_selector", "field_selector", "owns", "watches", "concurrency",
  "resync", "instructions", "memory", "retry", "reconcile", "on_add", "on_update", "on_delete", "filter",
  "finalizer", "finalize", "shard_by", "metadata_only", "trim" }
M.WATCH_FIELDS = { "map", "namespace", "label_selector", "field_selector", "filter", "sharded", "metadata_only",
  "trim" }
M.OWNS_FIELDS = { "filter", "metadata_only", "trim" } -- an owns entry's, beside its kind: { "v1/Pod", filter = ... }

-- What is wrong with t's trim and metadata_only (a controller, an owns
-- entry or a watch), or nil: json.cut says what is wrong with the paths.
local function bad_cache(t)
  if t.metadata_only ~= nil and type(t.metadata_only) ~= "boolean" then
    return "metadata_only", "metadata_only must be true or false, got " .. M.shown(t.metadata_only)
  end
  if t.trim == nil then return nil end
  if type(t.trim) ~= "table" then
    return "trim", "trim must be { drop = { paths } } or { keep = { paths } }, got " .. M.shown(t.trim)
  end
  for k in pairs(t.trim) do
    if k ~= "drop" and k ~= "keep" then return "trim", ("trim has %s: only drop or keep"):format(M.shown(k)) end
  end
  if t.metadata_only then return "trim", "trim and metadata_only: a metadata-only cache keeps metadata alone" end
  local ok, err = pcall(core.json.cut, t.trim)
  if not ok then return "trim", "trim: " .. tostring(err):gsub("^json%.cut: ", "") end
end

-- The candidate nearest to word, or nil (luaop.nearest).
M.nearest = require "luaop.nearest"

local function unknown_fields(t, known, fixed, out, label, watch, at)
  local set = {}
  for _, f in ipairs(known) do set[f] = true end
  local keys = {}
  for k in pairs(t) do
    if not set[k] and not (fixed and fixed[k]) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local near = type(k) == "string" and M.nearest(k, known)
    out[#out + 1] = { field = k, watch = watch, unknown = true,
      message = ("controller %s: %sunknown field %s%s"):format(label,
        at or watch and ("watches[%d]: "):format(watch) or "",
        type(k) == "string" and k or ("[" .. tostring(k) .. "]"), near and (" (did you mean %s?)"):format(near) or "") }
  end
end

-- Everything wrong with def: { {field =, message =, watch = index (a
-- watches entry's), unknown = true (a field luaop does not know)}, ... },
-- in the order of the fields; empty when it validates.
function M.problems(def)
  if type(def) ~= "table" then return { { message = "a controller definition is a table" } } end
  local out = {}
  local function fail(field, fmt, ...) out[#out + 1] = { field = field, message = fmt:format(...) } end
  local name = def.name
  if type(def.name) ~= "string" or def.name == "" then
    fail("name", "a controller needs a name")
    name = "?"
  -- (it labels metrics, log lines and Events: kept short and printable;
  -- C sees a name up to its first NUL: "steady\0x" was another name to
  -- the check that names are unique, and the controller "steady" to the
  -- metrics it recorded into and to the log)
  elseif #def.name > M.NAME_MAX or def.name:find("%c") then
    local shown = def.name:sub(1, 40):gsub("%c", function(c) return ("\\%d"):format(c:byte()) end)
    name = ("\"%s%s\""):format(shown, #def.name > 40 and "..." or "")
    fail("name", "controller %s: name is 1 to %d characters, none of them a control character", name, M.NAME_MAX)
  end
  if type(def.resource) ~= "string" then
    fail("resource", "controller %s needs a resource (the kind it reconciles)", name)
  else
    local bad = bad_kind(def.resource)
    if bad then fail("resource", "controller %s: resource %q: %s", name, def.resource, bad) end
  end
  local handlers = false
  for _, h in ipairs(M.HANDLERS) do
    if def[h] ~= nil and type(def[h]) ~= "function" then fail(h, "controller %s: %s must be a function", name, h) end
    handlers = handlers or def[h] ~= nil
  end
  if def.reconcile ~= nil and type(def.reconcile) ~= "function" then
    fail("reconcile", "controller %s: reconcile must be a function", name)
  end
  if def.reconcile == nil and not handlers then
    fail("reconcile", "controller %s needs a reconcile function (or on_add, on_update, on_delete handlers)", name)
  end
  if def.reconcile and handlers then
    fail("reconcile", "controller %s: reconcile or on_add/on_update/on_delete handlers, not both", name)
  end
  if def.owns ~= nil and type(def.owns) ~= "table" then fail("owns", "controller %s: owns lists kinds", name) end
  for i, e in ipairs(type(def.owns) == "table" and def.owns or {}) do
    local k, f = filter.owned(e)
    local bad = type(k) ~= "string" and "" or bad_kind(k)
    if bad == "" then fail("owns", "controller %s: owns lists kinds", name)
    elseif bad then fail("owns", "controller %s: owns %q: %s", name, k, bad) end
    bad = filter.problem(f)
    if bad then fail("owns", "controller %s: owns[%d].filter: %s", name, i, bad) end
    if type(e) == "table" then
      local n = #out
      unknown_fields(e, M.OWNS_FIELDS, { [1] = true }, out, name, nil, ("owns[%d]: "):format(i))
      local _, why = bad_cache(e)
      if why then fail("owns", "controller %s: owns[%d].%s", name, i, why) end
      for j = n + 1, #out do out[j].field = "owns" end -- (said at the line of owns)
    end
  end
  -- a field beside a list's entries, not in one (owns = { "v1/Pod", filter =
  -- "generation" }): taken, the field would do nothing, without a word
  for _, field in ipairs { "owns", "watches" } do
    local keys = {}
    for k in pairs(type(def[field]) == "table" and def[field] or {}) do
      if math.type(k) ~= "integer" then keys[#keys + 1] = tostring(k) end
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local first = def[field][1]
      fail(field, "controller %s: %s.%s: %s is a list of entries, and %s goes in one: %s = { { %q, %s = ... } }", name,
        field, k, field, k, field, type(first) == "string" and first or "KIND", k)
    end
  end
  if def.watches ~= nil and type(def.watches) ~= "table" then
    fail("watches", "controller %s: watches lists { kind, map = function(obj) return requests end }", name)
  end
  for i, w in ipairs(type(def.watches) == "table" and def.watches or {}) do
    if type(w) ~= "table" or type(w[1]) ~= "string" or type(w.map) ~= "function" then
      fail("watches", "controller %s: watches: each is { kind, map = function(obj) return requests end }", name)
    else
      local bad = bad_kind(w[1])
      if bad then fail("watches", "controller %s: watches %q: %s", name, w[1], bad) end
    end
    if type(w) == "table" then
      unknown_fields(w, M.WATCH_FIELDS, { [1] = true }, out, name, i)
      local bad = filter.problem(w.filter)
      if bad then fail("filter", "controller %s: watches[%d].filter: %s", name, i, bad) out[#out].watch = i end
      if w.sharded ~= nil and type(w.sharded) ~= "boolean" then
        fail("sharded", "controller %s: watches[%d].sharded must be true or false, got %s", name, i, M.shown(w.sharded))
        out[#out].watch = i
      end
      local field, why = bad_cache(w)
      if why then
        fail(field, "controller %s: watches[%d].%s", name, i, why)
        out[#out].watch = i
      end
    end
  end
  local bad_filter = filter.problem(def.filter)
  if bad_filter then fail("filter", "controller %s: filter: %s", name, bad_filter) end
  -- (a selector is Kubernetes' text: "team=a,tier in (small,large)")
  local function selectors(t, i)
    for _, f in ipairs { "namespace", "label_selector", "field_selector" } do
      if t[f] ~= nil and type(t[f]) ~= "string" then
        fail(f, "controller %s: %s%s must be a string%s, got %s", name, i and ("watches[%d]."):format(i) or "", f,
          f == "namespace" and "" or ' such as "team=a,tier in (small,large)"', M.shown(t[f]))
        out[#out].watch = i
      end
    end
  end
  selectors(def)
  for i, w in ipairs(type(def.watches) == "table" and def.watches or {}) do
    if type(w) == "table" then selectors(w, i) end
  end
  if def.instructions ~= nil and (math.type(def.instructions) ~= "integer" or def.instructions < 1) then
    fail("instructions", "controller %s: instructions must be an integer >= 1", name)
  end
  if def.concurrency ~= nil and (math.type(def.concurrency) ~= "integer" or def.concurrency < 1) then
    fail("concurrency", "controller %s: concurrency must be an integer >= 1", name)
  end
  if def.memory ~= nil and not bytes(def.memory) then
    fail("memory", "controller %s: memory must be bytes (an integer >= 1) or a quantity such as \"64Mi\"", name)
  end
  if def.resync ~= nil and (type(def.resync) ~= "number" or def.resync <= 0) then
    fail("resync", "controller %s: resync must be a number of seconds > 0", name)
  end
  local cache_field, bad_cache_why = bad_cache(def)
  if bad_cache_why then fail(cache_field, "controller %s: %s", name, bad_cache_why) end
  if def.shard_by ~= nil and def.shard_by ~= "namespace" and def.shard_by ~= "uid" and def.shard_by ~= "none" then
    fail("shard_by", "controller %s: shard_by must be \"namespace\", \"uid\" (the field whose hash places a key "
      .. "in a shard ring) or \"none\" (all keys on one replica)", name)
  end
  for _, p in ipairs(retry.problems(def, name, M.nearest)) do out[#out + 1] = p end -- (luaop.retry)
  require("luaop.finalizer").problems(def, fail, name)
  unknown_fields(def, M.FIELDS, nil, out, name)
  return out
end

-- Validate and mark a definition. Errors name the script and the line of
-- the definition's reconcile (the usual `return luaop.controller {...}` is
-- a tail call, which leaves no caller's line to name); loading a script
-- moves that line to the field's own (luaop.script).
local budgets = setmetatable({}, { __mode = "k" }) -- definition -> a reconcile's budgets

-- A budget a definition declares, cut down to the command line's limit.
local function capped(def, what, v, max, flag)
  if v <= max then return v end
  core.log.write("error", "controller", "a budget above the limit: using the limit", {
    controller = def.name, budget = what, declared = v, limit = max, flag = flag,
  })
  return max
end

-- ---- the lines of a definition's fields ---------------------------------------
-- (luaop --check's findings and the log line of an unknown field name the
-- same line: the field's own, where its constructor sets it)

-- The constructor (tables: core.check.fields grouped, id -> { name ->
-- line }) not in taken whose fields are all keys of t, the most of them;
-- of those, the one whose function fields are written where t's functions
-- are defined (two constructors of the same fields, two definitions), then
-- the first. Marked taken; its { name -> line }, or nil.
function M.constructor(tables, t, taken)
  local best, most, fits = nil, 0, -1
  for id, fields in pairs(tables) do
    if not taken[id] then
      local n, all, fit = 0, true, 0
      for name, line in pairs(fields) do
        local v = rawget(t, name)
        if v == nil then all = false break end
        n = n + 1
        if type(v) == "function" then
          local ok, at = pcall(core.check.line, v)
          if ok and at == line then fit = fit + 1 end
        end
      end
      if all and n > 0 and (n > most or (n == most and (fit > fits or (fit == fits and id < best)))) then
        best, most, fits = id, n, fit
      end
    end
  end
  if best then taken[best] = true end
  return best and tables[best]
end

-- The lines of def's fields, from core.check.fields of the chunk that
-- made it: { def = { name -> line }, watches = { [i] = { name -> line } } }.
-- taken: the constructors other definitions took already (shared by the
-- definitions of one chunk, in order).
function M.field_lines(fields, def, taken)
  local tables = {}
  for _, f in ipairs(fields) do
    tables[f.table] = tables[f.table] or {}
    tables[f.table][f.name] = tables[f.table][f.name] or f.line
  end
  taken = taken or {}
  local lines = { def = M.constructor(tables, def, taken) or {}, watches = {} }
  for i, w in ipairs(type(def.watches) == "table" and def.watches or {}) do
    lines.watches[i] = type(w) == "table" and M.constructor(tables, w, taken) or {}
  end
  return lines
end

-- The chunk of the file that defined def, to read its fields' lines
-- from: the function that called define when it is of that file, else
-- the file compiled again (not run; only where the caller may wait: the
-- file is read on the thread pool). nil when neither is to be had.
local getinfo = debug and debug.getinfo
local function chunk_of(def, level)
  local f = def.reconcile
  for _, h in ipairs(M.HANDLERS) do f = type(f) == "function" and f or def[h] end
  if type(f) ~= "function" then -- (any function of it: a misspelt reconcile's)
    local names = {}
    for k, v in pairs(def) do
      if type(v) == "function" and type(k) == "string" then names[#names + 1] = k end
    end
    table.sort(names)
    f = def[names[1]]
    for _, w in ipairs(type(def.watches) == "table" and def.watches or {}) do
      f = type(f) == "function" and f or type(w) == "table" and w.map
    end
  end
  if type(f) ~= "function" then return nil end
  local ok, _, source = pcall(core.check.line, f)
  if not ok or type(source) ~= "string" or source:sub(1, 1) ~= "@" then return nil end
  local info = getinfo and getinfo(level + 1, "fS")
  if info and info.source == source and info.what ~= "C" then return info.func end
  if not coroutine.isyieldable() then return nil end
  local text = core.fs.read(source:sub(2))
  return text and load(text, source, "t", {}) or nil
end

-- "path:line" of each of def's problems (problem -> where), as luaop
-- --check names it: its field's line; for a field the definition lacks
-- (no reconcile), the line of its first field; where(def) for those it
-- cannot find.
local function problem_lines(def, problems, level)
  local out, lines, file, first = {}, nil, nil, nil
  local chunk = chunk_of(def, level + 1)
  if chunk then
    lines = M.field_lines(core.check.fields(chunk), def)
    file = select(3, pcall(core.check.line, chunk)):sub(2)
    for _, l in pairs(lines.def) do first = math.min(first or l, l) end
  end
  local fallback = where(def)
  fallback = fallback ~= "" and fallback:sub(1, -3) or nil
  for _, p in ipairs(problems) do
    local l = lines and (p.watch and (lines.watches[p.watch] or {})[p.field] or not p.watch and lines.def[p.field])
    l = l or (lines and not p.watch and not p.unknown and first)
    out[p] = l and ("%s:%d"):format(file, l) or fallback
  end
  return out
end
M.problem_lines = problem_lines -- (luaop.webhook.definition's too)

-- Raise the first problem that is not an unknown field (at its line, with
-- the unknown fields beside a missing one: a misspelt reconcile is the
-- likely cause of a missing one), else log each unknown field, ignored, as
-- `what` ("controller", "webhook") with fields beside. at: problem -> line.
function M.report(def, problems, at, what, fields)
  for _, p in ipairs(problems) do
    if not p.unknown then
      local text = { (at[p] and at[p] .. ": " or "") .. p.message }
      for _, q in ipairs(type(def) == "table" and p.field and def[p.field] == nil and problems or {}) do
        if q.unknown then text[#text + 1] = (at[q] and at[q] .. ": " or "") .. q.message end
      end
      error(table.concat(text, "; "), 0)
    end
  end
  for _, p in ipairs(problems) do
    local f = { problem = p.message, script = at[p] }
    for k, v in pairs(fields or {}) do f[k] = v end
    core.log.write("error", what, ("a %s definition has a field luaop does not know: ignored"):format(what), f)
  end
end

-- When set (luaop --check), define hands every definition and its
-- problems to M.collect(def, problems) and returns it marked, problems and
-- all, so that the script's top level runs on and each of its definitions
-- is checked.
M.collect = nil

function M.define(def)
  local problems = M.problems(def)
  if M.collect then
    M.collect(def, problems)
    if type(def) ~= "table" then return def end
    if #problems > 0 then return setmetatable(def, Definition) end
  end
  -- an unknown field is logged, not refused: a reload that only adds one
  -- (a field of a newer luaop, a typo) keeps the new version serving
  -- (each at the line of its field, as luaop --check says it)
  local at = #problems > 0 and type(def) == "table" and problem_lines(def, problems, 2) or {}
  M.report(def, problems, at, "controller", type(def) == "table" and { controller = def.name } or nil)
  budgets[def] = {
    instructions = capped(def, "instructions", def.instructions or M.DEFAULT_INSTRUCTIONS, M.MAX_INSTRUCTIONS,
      "--max-instructions"),
    memory = capped(def, "memory", def.memory and bytes(def.memory) or M.DEFAULT_MEMORY, M.MAX_MEMORY, "--max-memory"),
  }
  return setmetatable(def, Definition)
end

function M.is_definition(v)
  return getmetatable(v) == Definition
end

-- A value as a message about misuse shows it: the string "30s", the
-- number -5, nil, a table (the client's errors say it so too).
M.shown = require("luaop.client.errors").shown

-- The markers reconcile returns. Misuse raises at the script's line.
function M.requeue_after(seconds)
  if type(seconds) ~= "number" or seconds ~= seconds or seconds < 0 then
    error(("requeue_after needs a number of seconds >= 0, got %s"):format(M.shown(seconds)), 2)
  end
  return { requeue_after = seconds }
end

function M.requeue(...)
  if select("#", ...) > 0 then
    error(("requeue() takes no argument (it requeues with the per-key backoff), got %s: for a delay, "
      .. "return luaop.requeue_after(seconds)"):format(M.shown((...))), 2)
  end
  return { requeue = true }
end

local function kind_name(spec)
  -- (anchored: "([^/]+)$" is tried from every position of spec in turn)
  return spec:match("^.*/([^/]+)$") or spec:match("^[^/]+$")
end

M.kind_name = kind_name

-- The budgets of one reconcile of def: {instructions =, memory =}.
function M.budgets(def)
  return budgets[def]
end

return M
