-- luaop.metrics - a script's own metrics (docs/metrics.md, "Your own
-- metrics"): counters, gauges and histograms it declares, served at
-- /metrics beside the runtime's.
--
--   local copies = luaop.metrics.counter { name = "copier_copies_total", help = "...", labels = { "namespace" } }
--   copies:inc({ namespace = "x" })         -- :inc(labels [, n]); a gauge :set, :inc, :dec; a histogram :observe
--
-- Each script's luaop.metrics is its own (script/sandbox.lua makes one for
-- each compile: a version of the script). What a version declares at its
-- top level is pending until the manager takes the version
-- (Manager:set -> M.settle): then its metrics show, the ones the running
-- version declared the same way (type, help, labels, buckets) keep their
-- series and values, and the ones it no longer declares (or declares
-- differently) go. A version that fails to load changes nothing. A
-- declaration in a reconcile of the running version shows at once (one of
-- a name it had, declared differently, replaces it). The families live in
-- the runtime's registry (src/metrics.c, metrics_custom); a script's series
-- are charged to an owner of its own, at most M.SERIES.
local core = require "luaop.core"
local logging = require "luaop.logging"

local M = {}

-- Series one script's metrics may hold together; past it, an update that
-- would make a new series is dropped, counted in
-- luaop_script_series_dropped_total{script} and logged once.
M.SERIES = 1000
-- The longest label value (bytes): a bound on the memory of a series.
M.MAX_LABEL_VALUE = 512
M.MAX_LABELS = 10
M.MAX_BUCKETS = 64
M.MAX_NAME = 200
M.MAX_HELP = 1000
-- Prometheus's default buckets (client_golang's prometheus.DefBuckets).
M.DEFAULT_BUCKETS = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 }
-- The prefixes of the runtime's own families (src/metrics.c) and of the
-- ones a Go operator's /metrics has: a script's name may start with none.
M.RESERVED = { "controller_runtime_", "workqueue_", "rest_client_", "leader_election_", "luaop_", "process_",
  "go_", "promhttp_", "certwatcher_" }

-- What promtool check metrics's lint refuses in a name, by "_" token:
-- abbreviated units, units that are not base units, and the type.
local ABBREVIATED = {}
for _, t in ipairs { "s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d" } do
  ABBREVIATED[t] = true
end
local NOT_BASE = { minutes = "seconds", hours = "seconds", days = "seconds", weeks = "seconds", bits = "bytes",
  fahrenheit = "celsius" }
for _, p in ipairs { "pico", "nano", "micro", "milli", "centi", "deci", "deca", "hecto", "kilo", "kibi", "mega",
  "mibi", "giga", "gibi", "tera", "tebi", "peta", "pebi" } do
  for _, u in ipairs { "seconds", "bytes", "meters", "metres", "grams", "joules", "volts", "amperes", "celsius",
    "kelvin" } do
    NOT_BASE[p .. u] = u
  end
end
local TYPES = { counter = true, gauge = true, histogram = true, summary = true }
local FIELDS = { name = true, help = true, labels = true, buckets = true }

local runtime_names -- the runtime's families, by name (core.metrics.names)
local function runtime_family(name)
  if not runtime_names then
    runtime_names = {}
    for n in core.metrics.names():gmatch("([^ \n]+)[^\n]*\n") do runtime_names[n] = true end
  end
  return runtime_names[name]
end

local function shown(v)
  if type(v) == "string" then return ("%q"):format(v) end
  return type(v) == "number" and tostring(v) or "a " .. type(v)
end

local function name_problem(name, kind)
  if type(name) ~= "string" then return "name must be a string, got " .. shown(name) end
  if #name > M.MAX_NAME or not name:match("^[a-z_][a-z0-9_]*$") or name:match("^__") then
    return ("name %s is not a metric name for luaop: lower-case letters, digits and _ (snake_case, as " ..
      "promtool's lint wants), not starting with a digit or __, at most %d bytes"):format(shown(name), M.MAX_NAME)
  end
  for _, p in ipairs(M.RESERVED) do
    if name:sub(1, #p) == p then
      return ("name %s is the runtime's: %s* names are luaop's and controller-runtime's own"):format(name, p)
    end
  end
  if runtime_family(name) then return ("name %s is one of the runtime's metrics"):format(name) end
  local total = name:match("_total$") ~= nil
  if kind == "counter" and not total then return ("a counter's name ends in _total: %s"):format(name) end
  if kind ~= "counter" and total then return ("only a counter's name ends in _total: %s"):format(name) end
  for _, s in ipairs { "_bucket", "_sum", "_count" } do
    if name:sub(-#s) == s then return ("name %s ends in %s, which a histogram's series use"):format(name, s) end
  end
  for t in name:gmatch("[^_]+") do
    if ABBREVIATED[t] then return ("name %s has an abbreviated unit (%s): spell it out"):format(name, t) end
    if NOT_BASE[t] then return ("name %s has the unit %s: use the base unit %s"):format(name, t, NOT_BASE[t]) end
    if TYPES[t] then return ("name %s names a metric type (%s)"):format(name, t) end
  end
end

local function list(v, what)
  if v == nil then return {} end
  if type(v) ~= "table" then return nil, ("%s must be a list, got %s"):format(what, shown(v)) end
  local out = {}
  for k in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 or k > #v then return nil, what .. " must be a list (no other keys)" end
  end
  for i = 1, #v do out[i] = v[i] end
  return out
end

-- The declaration a spec makes: {name, kind, help, labels, buckets, key}
-- | nil, why (promtool's lint rules and Prometheus's, see docs/metrics.md).
function M.check(kind, spec)
  if type(spec) ~= "table" then return nil, "needs a table {name = ..., help = ..., labels = {...}}" end
  for k in pairs(spec) do
    if not FIELDS[k] or (k == "buckets" and kind ~= "histogram") then
      return nil, ("unknown field %s (a %s has name, help, labels%s)"):format(shown(k), kind,
        kind == "histogram" and ", buckets" or "")
    end
  end
  local d = { kind = kind, name = spec.name, help = spec.help }
  local bad = name_problem(spec.name, kind)
  if bad then return nil, bad end
  if type(d.help) ~= "string" or d.help == "" or #d.help > M.MAX_HELP or not utf8.len(d.help)
    or d.help:find("\0", 1, true) then
    return nil, ("%s: help must be a text (UTF-8, 1 to %d bytes), got %s"):format(d.name, M.MAX_HELP, shown(d.help))
  end
  local labels, lerr = list(spec.labels, d.name .. ": labels")
  if not labels then return nil, lerr end
  if #labels > M.MAX_LABELS then return nil, ("%s: at most %d labels"):format(d.name, M.MAX_LABELS) end
  local set = {}
  for _, l in ipairs(labels) do
    if type(l) ~= "string" or not l:match("^[a-z_][a-z0-9_]*$") or l:match("^__") or #l > M.MAX_NAME then
      return nil, ("%s: label %s is not a label name for luaop: lower-case letters, digits and _, not starting " ..
        "with a digit or __"):format(d.name, shown(l))
    end
    if l == "le" or l == "quantile" then
      return nil, ("%s: label %s is reserved for histograms' and summaries' series"):format(d.name, l)
    end
    if set[l] then return nil, ("%s: label %s twice"):format(d.name, l) end
    set[l] = true
  end
  d.labels, d.label_set = labels, set
  local key = { kind, d.help, table.concat(labels, ",") }
  if kind == "histogram" then
    local b, berr = list(spec.buckets, d.name .. ": buckets")
    if not b then return nil, berr end
    if spec.buckets == nil then b = M.DEFAULT_BUCKETS end
    if b[#b] == math.huge then b = { table.unpack(b, 1, #b - 1) } end -- (+Inf is always there)
    if #b == 0 or #b > M.MAX_BUCKETS then return nil, ("%s: 1 to %d buckets"):format(d.name, M.MAX_BUCKETS) end
    for i, x in ipairs(b) do
      if type(x) ~= "number" or x ~= x or x == math.huge or x == -math.huge or (i > 1 and x <= b[i - 1]) then
        return nil, ("%s: buckets must be finite numbers in increasing order"):format(d.name)
      end
      key[#key + 1] = ("%.17g"):format(x)
    end
    d.buckets = b
  end
  d.key = table.concat(key, "\0")
  return d
end

-- ---- scripts and their versions -------------------------------------------

local scripts = {} -- path -> {live = {name -> record}, owner, drops, scope, told}
local by_name = {} -- name -> the record shown under it, whichever script's
local latest = {} -- path -> the scope of its newest compile, until settled
local private = setmetatable({}, { __mode = "k" }) -- a metric's handle -> its record
local log = logging.logger("metrics")

-- The script's entry, made on first use; a version no longer running (a
-- reconcile of a removed script still declaring) gets one that is kept
-- nowhere, so it makes no entry for a script that is gone.
local function entry(path, scope)
  local s = scripts[path]
  if not s then
    s = { live = {}, owner = core.metrics.owner("script metrics " .. path, M.SERIES),
      drops = core.metrics.owner("script metric drops " .. path, 1) }
    if not (scope and scope.state == "old") then scripts[path] = s end
  end
  return s
end

-- The caller of a face function, as "file:line" (as error() would name
-- it: luaop's own Lua has no debug library).
local function where(level)
  local _, msg = pcall(error, "", level + 2)
  msg = tostring(msg):match("^(.*): $")
  return msg or "?"
end

local methods = {} -- kind -> the handles' method table (functions only)
local handle_mt = {} -- kind -> the handles' metatable

local function new_record(d, scope, s, line)
  local fam, err = core.metrics.custom { name = d.name, help = d.help, type = d.kind, labels = d.labels,
    buckets = d.buckets }
  if not fam then return nil, err end
  local rec = { name = d.name, kind = d.kind, key = d.key, labels = d.labels, label_set = d.label_set, fam = fam,
    path = scope.path, line = line, cache = {}, entry = s }
  rec.handle = setmetatable({}, handle_mt[d.kind])
  private[rec.handle] = rec
  return rec
end

-- Show rec under its name (the script's live one of that name goes).
local function show(rec)
  local s = rec.entry
  local old = s.live[rec.name]
  if old == rec then return true end
  if old then
    old.fam:remove()
    if by_name[old.name] == old then by_name[old.name] = nil end
    s.live[rec.name] = nil
  end
  local ok, err = rec.fam:show()
  if not ok then return nil, err end
  s.live[rec.name], by_name[rec.name] = rec, rec
  return true
end

-- A declaration from scope (a version of a script): its metric's record
-- | nil, why.
function M.declare(scope, kind, spec, level)
  local d, err = M.check(kind, spec)
  if not d then return nil, err end
  local mine = scope.metrics[d.name]
  if mine then
    if mine.key == d.key then return mine end
    return nil, ("metric %s is declared differently at %s"):format(d.name, mine.line)
  end
  local other = by_name[d.name]
  if other and other.path ~= scope.path then
    return nil, ("metric %s is declared by %s already (%s): a metric belongs to one script"):format(d.name,
      other.path, other.line)
  end
  local s = entry(scope.path, scope)
  local live = s.live[d.name]
  local rec = live
  if not (live and live.key == d.key) then
    rec, err = new_record(d, scope, s, where(level + 1))
    if not rec then return nil, err end
    if scope.state == "live" then
      local ok, serr = show(rec)
      if not ok then return nil, serr end
    end
  end
  scope.metrics[d.name] = rec
  return rec
end

-- luaop.metrics for a version of the script at path (nil: the program, or
-- code outside a script: shown at once).
function M.face(path)
  local scope = { path = path or "the program", state = path and "loading" or "live", metrics = {} }
  if path then latest[path] = scope end
  local face = {}
  for _, kind in ipairs { "counter", "gauge", "histogram" } do
    face[kind] = function(spec)
      local rec, err = M.declare(scope, kind, spec, 2)
      if not rec then error(("luaop.metrics.%s: %s"):format(kind, err), 2) end
      return rec.handle
    end
  end
  return face
end

-- Remove every metric of the script at path.
function M.remove(path)
  local s = scripts[path]
  latest[path] = nil
  if not s then return end
  for name, rec in pairs(s.live) do
    rec.fam:remove()
    if by_name[name] == rec then by_name[name] = nil end
  end
  if s.scope then s.scope.state = "old" end
  s.owner:drop()
  s.drops:drop()
  scripts[path] = nil
end

-- The manager took the newest version of the script at path (present), or
-- the script is gone (not present).
function M.settle(path, present)
  if not present then return M.remove(path) end
  local scope = latest[path]
  latest[path] = nil
  if not scope or scope.state ~= "loading" then return end
  local s = entry(path)
  for name, rec in pairs(s.live) do
    if scope.metrics[name] ~= rec then
      rec.fam:remove()
      s.live[name] = nil
      if by_name[name] == rec then by_name[name] = nil end
    end
  end
  for name, rec in pairs(scope.metrics) do
    local ok, err = show(rec)
    if not ok then log:error("a script's metric is not shown", { script = path, metric = name, error = err }) end
  end
  if s.scope then s.scope.state = "old" end
  s.scope, scope.state = scope, "live"
end

-- Every script's metrics go (the manager stops: the test kit's next
-- environment starts from none).
function M.clear()
  local paths = {}
  for path in pairs(scripts) do paths[#paths + 1] = path end
  for _, path in ipairs(paths) do M.remove(path) end
  latest = {}
end

-- ---- the handles ------------------------------------------------------------

-- The series of rec for the labels a script passed, or nil when it is
-- dropped; raises at the script's line (level) for a wrong label set.
function M.series(rec, labels, level)
  local values
  if #rec.labels == 0 then
    local extra = type(labels) ~= "table" and labels ~= nil
    for _ in pairs(type(labels) == "table" and labels or {}) do extra = true end
    if extra then error(("%s has no labels: pass nil or {}, got %s"):format(rec.name, shown(labels)), level + 1) end
    values = {}
  else
    if type(labels) ~= "table" then
      error(("%s needs its labels, a table with %s, got %s"):format(rec.name, table.concat(rec.labels, ", "),
        shown(labels)), level + 1)
    end
    values = {}
    for i, l in ipairs(rec.labels) do
      local v = labels[l]
      if type(v) ~= "string" then
        error(("%s: label %s must be a string, got %s"):format(rec.name, l, v == nil and "none" or shown(v)),
          level + 1)
      end
      if #v > M.MAX_LABEL_VALUE or not utf8.len(v) or v:find("\0", 1, true) then
        error(("%s: label %s must be UTF-8 text of at most %d bytes"):format(rec.name, l, M.MAX_LABEL_VALUE),
          level + 1)
      end
      values[i] = v
    end
    for k in pairs(labels) do
      if not rec.label_set[k] then
        error(("%s has no label %s (its labels: %s)"):format(rec.name, shown(k), table.concat(rec.labels, ", ")),
          level + 1)
      end
    end
  end
  local key = table.concat(values, "\0")
  local h = rec.cache[key]
  if h then return h end
  local why
  h, why = rec.fam:series(values, rec.entry.owner)
  if not why then
    rec.cache[key] = h
    return h
  end
  local s = rec.entry
  if scripts[rec.path] == s and not why:find("removed", 1, true) and not why:find("dropped", 1, true) then
    core.metrics.series("luaop_script_series_dropped_total", { rec.path }, s.drops):add()
    if not s.told then
      s.told = true
      log:error("a script's metric series is dropped (logged once per script)", { script = rec.path,
        metric = rec.name, error = why })
    end
  end
  return nil
end

local function number(rec, v, default, what, level)
  if v == nil then v = default end
  if type(v) ~= "number" then
    error(("%s: %s must be a number, got %s"):format(rec.name, what, shown(v)), level + 1)
  end
  return v
end

-- m:inc(labels, n): labels may be left out (or n passed first) when the
-- metric has none.
local function args(rec, labels, v)
  if #rec.labels == 0 and type(labels) == "number" then return nil, labels end
  return labels, v
end

local function method(f)
  return function(self, labels, v)
    local rec = private[self]
    if not rec then error("a metric's method: call it with a colon (m:inc(...))", 2) end
    labels, v = args(rec, labels, v)
    return f(rec, labels, v)
  end
end

local function inc(sign)
  return method(function(rec, labels, n)
    n = number(rec, n, 1, "the amount", 3)
    if rec.kind == "counter" and not (n >= 0 and n < math.huge) then
      error(("%s: a counter goes up by a finite amount of 0 or more, got %s"):format(rec.name, shown(n)), 3)
    end
    local s = M.series(rec, labels, 3)
    if s then s:add(sign * n) end
  end)
end

local function gauge_add(sign)
  return method(function(rec, labels, n)
    n = number(rec, n, 1, "the amount", 3)
    local s = M.series(rec, labels, 3)
    if s then s:set(s:value() + sign * n) end
  end)
end

local function wrong(kind, name, has)
  return function() error(("a %s has no %s: it has %s"):format(kind, name, has), 2) end
end

methods.counter = { inc = inc(1), set = wrong("counter", "set", "inc"), dec = wrong("counter", "dec", "inc"),
  observe = wrong("counter", "observe", "inc") }
methods.gauge = { inc = gauge_add(1), dec = gauge_add(-1),
  set = method(function(rec, labels, v)
    v = number(rec, v, nil, "the value", 3)
    local s = M.series(rec, labels, 3)
    if s then s:set(v) end
  end), observe = wrong("gauge", "observe", "set, inc and dec") }
methods.histogram = { observe = method(function(rec, labels, v)
  v = number(rec, v, nil, "the value", 3)
  local s = M.series(rec, labels, 3)
  if s then s:observe(v) end
end), inc = wrong("histogram", "inc", "observe"), set = wrong("histogram", "set", "observe"),
  dec = wrong("histogram", "dec", "observe") }
for kind, m in pairs(methods) do
  handle_mt[kind] = { __index = m, __metatable = false,
    __newindex = function() error("a metric is read-only", 2) end,
    __tostring = function(self) return ("luaop.metrics %s %s"):format(kind, private[self].name) end }
end

return M
