-- A script's own metrics (luaop.metrics, docs/metrics.md "Your own
-- metrics"): declared with a name, help and label names, shown in /metrics
-- beside the runtime's (the registry's text, what a scrape reads), under
-- the test kit: scripts loaded as luaop loads them (sandbox, budgets).
local core = require "luaop.core"
local testing = require "luaop.testing"
local script_metrics = require "luaop.metrics"
local proc = require "support.proc"
local kit = require "support.kit"

local cm = kit.cm

-- promtool check metrics on the registry's text: true | false, its output
local function promtool(text)
  local file = os.tmpname()
  local f = assert(io.open(file, "w"))
  f:write(text)
  f:close()
  local ok, out = proc.sh("promtool check metrics < " .. proc.quote(file))
  os.remove(file)
  return ok, out
end

-- the samples of family name (its lines, sorted), from the registry's text
local function samples(name)
  local out = {}
  for line in core.metrics.text():gmatch("[^\n]+") do
    if line:sub(1, #name) == name and line:sub(#name + 1, #name + 1):match("[{ _]") then out[#out + 1] = line end
  end
  table.sort(out)
  return out
end

local COPIER = [[
local luaop = require "luaop"
local copies = luaop.metrics.counter { name = "copier_copies_total", help = "ConfigMaps copied, per namespace",
  labels = { "namespace" } }
local last = luaop.metrics.gauge { name = "copier_last_size", help = "Keys in the last ConfigMap copied",
  labels = { "namespace", "name" } }
local sizes = luaop.metrics.histogram { name = "copier_keys", help = "Keys per ConfigMap",
  labels = { "namespace" }, buckets = { 1, 2, 5 } }
local waits = luaop.metrics.histogram { name = "copier_wait_seconds", help = "Seconds waited (default buckets)" }
return luaop.controller { name = "copier", resource = "v1/ConfigMap",
  reconcile = function(ctx, req)
    local obj = ctx:get("ConfigMap", req)
    if not obj then return end
    local n = 0
    for _ in pairs(obj.data or {}) do n = n + 1 end
    copies:inc({ namespace = req.namespace })
    last:set({ namespace = req.namespace, name = req.name }, n)
    last:inc({ namespace = req.namespace, name = req.name }, 10)
    last:dec({ namespace = req.namespace, name = req.name }, 5)
    sizes:observe({ namespace = req.namespace }, n)
    waits:observe(nil, 0.3)
  end }
]]

describe("a script's own metrics", function()
  local w = kit.per_test(before_each, after_each)

  local function load(files)
    local paths = {}
    for name, text in pairs(files) do paths[name] = proc.write(w.dir, name, text) end
    return paths
  end

  it("count, set and observe in counters, gauges and histograms, shown beside the runtime's, which promtool accepts",
    function()
    local p = load { ["copier.lua"] = COPIER }
    w.env = testing.env { scripts = { p["copier.lua"] } }
    w.env:create(cm("a", { x = "1" }))
    w.env:create(cm("b", { x = "1", y = "2", z = "3" }))
    w.env:create(kit.cm("c"))
    assert.are.equal(3, w.env:metric("copier_copies_total", { namespace = "default" }))
    assert.are.equal(8, w.env:metric("copier_last_size", { namespace = "default", name = "b" }))
    assert.are.equal(5, w.env:metric("copier_last_size", { namespace = "default", name = "c" }))
    assert.are.same({
      '# HELP copier_keys Keys per ConfigMap',
      '# TYPE copier_keys histogram',
      'copier_keys_bucket{namespace="default",le="+Inf"} 3',
      'copier_keys_bucket{namespace="default",le="1"} 2',
      'copier_keys_bucket{namespace="default",le="2"} 2',
      'copier_keys_bucket{namespace="default",le="5"} 3',
      'copier_keys_count{namespace="default"} 3',
      'copier_keys_sum{namespace="default"} 4',
    }, (function()
      local t = samples("copier_keys")
      table.insert(t, 1, "# TYPE copier_keys histogram")
      table.insert(t, 1, "# HELP copier_keys Keys per ConfigMap")
      return t
    end)())
    -- Prometheus's default buckets when none are given
    local les = {}
    for le in table.concat(samples("copier_wait_seconds_bucket"), "\n"):gmatch('le="([^"]+)"') do les[#les + 1] = le end
    table.sort(les, function(a, b) return (tonumber(a) or math.huge) < (tonumber(b) or math.huge) end)
    assert.are.same({ "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf" }, les)
    assert.are.equal(0, w.env:metric("copier_wait_seconds_bucket", { le = "0.25" }))
    assert.are.equal(3, w.env:metric("copier_wait_seconds_bucket", { le = "0.5" }))
    assert.are.equal(3, w.env:metric("copier_wait_seconds_count"))
    local text = core.metrics.text()
    assert.truthy(text:find("# HELP copier_copies_total ConfigMaps copied, per namespace\n# TYPE copier_copies_total " ..
      "counter\n", 1, true))
    assert.truthy(text:find('controller_runtime_reconcile_total{controller="copier",result="success"}', 1, true))
    local ok, out = promtool(text)
    assert.is_true(ok, out)
  end)

  it("refuse names, label names, help and buckets that Prometheus or promtool's lint refuse, at the declaring line",
    function()
    local p = load { ["ok.lua"] = "local luaop = require 'luaop'\n" ..
      "return luaop.controller { name = 'ok', resource = 'v1/ConfigMap', reconcile = function() end }\n" }
    w.env = testing.env { scripts = { p["ok.lua"] } }
    local path = p["ok.lua"]
    for _, c in ipairs {
      { 'counter { name = "copies", help = "h" }', "a counter's name ends in _total" },
      { 'gauge { name = "copies_total", help = "h" }', "only a counter's name ends in _total" },
      { 'gauge { name = "copierSize", help = "h" }', "is not a metric name" },
      { 'gauge { name = "copier:size", help = "h" }', "is not a metric name" },
      { 'gauge { name = "9lives", help = "h" }', "is not a metric name" },
      { 'gauge { name = "__x", help = "h" }', "is not a metric name" },
      { 'gauge { name = "copier_latency_ms", help = "h" }', "abbreviated unit" },
      { 'gauge { name = "copier_latency_milliseconds", help = "h" }', "base unit seconds" },
      { 'gauge { name = "copier_gauge_size", help = "h" }', "names a metric type" },
      { 'gauge { name = "copier_size_count", help = "h" }', "ends in _count" },
      { 'histogram { name = "copier_size_bucket", help = "h" }', "ends in _bucket" },
      { 'gauge { name = "copier_size", help = "" }', "help must be a text" },
      { 'gauge { name = "copier_size" }', "help must be a text" },
      { 'gauge { name = "copier_size", help = "h", labels = { "Namespace" } }', "is not a label name" },
      { 'gauge { name = "copier_size", help = "h", labels = { "__name" } }', "is not a label name" },
      { 'gauge { name = "copier_size", help = "h", labels = { "le" } }', "reserved for histograms" },
      { 'gauge { name = "copier_size", help = "h", labels = { "a", "a" } }', "label a twice" },
      { 'gauge { name = "copier_size", help = "h", labels = "a" }', "labels must be a list" },
      { 'gauge { name = "copier_size", help = "h", buckets = { 1 } }', "unknown field \"buckets\"" },
      { 'gauge { name = "copier_size", help = "h", label = { "a" } }', "unknown field \"label\"" },
      { 'histogram { name = "copier_size", help = "h", buckets = { 2, 1 } }', "increasing order" },
      { 'histogram { name = "copier_size", help = "h", buckets = { 0 / 0 } }', "increasing order" },
      { 'histogram { name = "copier_size", help = "h", buckets = {} }', "1 to 64 buckets" },
      { 'counter(nil)', "needs a table" },
    } do
      local text = "local luaop = require 'luaop'\n\nlocal m = luaop.metrics." .. c[1] .. "\n" ..
        "return luaop.controller { name = 'ok', resource = 'v1/ConfigMap', reconcile = function() end }\n"
      local ok, err = pcall(w.env.load, w.env, path, text)
      assert.is_false(ok, c[1])
      assert.truthy(tostring(err):find(path .. ":3: luaop.metrics.", 1, true), c[1] .. ": " .. tostring(err))
      assert.truthy(tostring(err):find(c[2], 1, true), c[1] .. ": " .. tostring(err))
    end
  end)

  it("raise at the caller's line for a wrong label set, a label value that is not a string, a counter going down "
    .. "and a method of another type", function()
    local p = load { ["ok.lua"] = "local luaop = require 'luaop'\n" ..
      "return luaop.controller { name = 'ok', resource = 'v1/ConfigMap', reconcile = function() end }\n" }
    w.env = testing.env { scripts = { p["ok.lua"] } }
    local path = p["ok.lua"]
    for _, c in ipairs {
      { 'c:inc({ namespace = "x", name = "y" })', 'has no label "name"' },
      { 'c:inc({})', "label namespace must be a string, got none" },
      { 'c:inc({ namespace = 3 })', "label namespace must be a string, got 3" },
      { 'c:inc()', "needs its labels" },
      { 'c:inc({ namespace = "x" }, -1)', "a counter goes up by a finite amount of 0 or more" },
      { 'c:inc({ namespace = "x" }, "1")', "the amount must be a number" },
      { 'c:inc({ namespace = ("x"):rep(513) })', "at most 512 bytes" },
      { 'c:inc({ namespace = "\\0" })', "UTF-8 text" },
      { 'c:set({ namespace = "x" }, 1)', "a counter has no set: it has inc" },
      { 'g:set({ a = "x" }, 1)', "copier_size has no labels" },
      { 'g:set(nil)', "the value must be a number" },
      { 'g:observe(nil, 1)', "a gauge has no observe" },
      { 'h:inc(nil, 1)', "a histogram has no inc" },
      { 'c.inc({ namespace = "x" })', "call it with a colon" },
      { 'c.x = 1', "read-only" },
    } do
      local text = "local luaop = require 'luaop'\n" ..
        "local c = luaop.metrics.counter { name = 'copier_copies_total', help = 'h', labels = { 'namespace' } }\n" ..
        "local g = luaop.metrics.gauge { name = 'copier_size', help = 'h' }\n" ..
        "local h = luaop.metrics.histogram { name = 'copier_seconds', help = 'h' }\n" ..
        c[1] .. "\n" ..
        "return luaop.controller { name = 'ok', resource = 'v1/ConfigMap', reconcile = function() end }\n"
      local ok, err = pcall(w.env.load, w.env, path, text)
      assert.is_false(ok, c[1])
      assert.truthy(tostring(err):find(path .. ":5: ", 1, true), c[1] .. ": " .. tostring(err))
      assert.truthy(tostring(err):find(c[2], 1, true), c[1] .. ": " .. tostring(err))
    end
    -- and a metric without labels takes its amount first
    local ok, err = pcall(w.env.load, w.env, path, "local luaop = require 'luaop'\n" ..
      "local g = luaop.metrics.gauge { name = 'copier_size', help = 'h' }\n" ..
      "g:set(4) g:inc() g:dec(2) g:inc({}, 5)\n" ..
      "return luaop.controller { name = 'ok', resource = 'v1/ConfigMap', reconcile = function() end }\n")
    assert.is_true(ok, err)
    assert.are.equal(8, w.env:metric("copier_size"))
  end)

  it("refuse at load, naming file and line, a name of the runtime's or of another script's metric, and keep the "
    .. "running version and its values", function()
    local function text(decl, name)
      return "local luaop = require 'luaop'\nlocal m = luaop.metrics." .. decl .. "\n" ..
        "return luaop.controller { name = '" .. name .. "', resource = 'v1/ConfigMap', " ..
        "reconcile = function() m:inc() end }\n"
    end
    local p = load { ["a.lua"] = text('counter { name = "shared_total", help = "h" }', "a") }
    w.env = testing.env { scripts = { p["a.lua"] } }
    w.env:create(cm("x"))
    assert.are.equal(1, w.env:metric("shared_total"))
    local b = proc.write(w.dir, "b.lua", text('counter { name = "shared_total", help = "h" }', "b"))
    local ok, err = pcall(w.env.load, w.env, b, text('counter { name = "shared_total", help = "h" }', "b"))
    assert.is_false(ok)
    assert.truthy(err:find(b .. ":2: luaop.metrics.counter: metric shared_total is declared by " .. p["a.lua"] ..
      " already (" .. p["a.lua"] .. ":2)", 1, true), err)
    for _, decl in ipairs {
      'counter { name = "workqueue_adds_total", help = "h" }',
      'counter { name = "controller_runtime_reconcile_total", help = "h" }',
      'counter { name = "luaop_anything_total", help = "h" }',
      'counter { name = "process_cpu_seconds_total", help = "h" }',
      'counter { name = "go_gc_total", help = "h" }',
      'counter { name = "leader_election_slowpath_total", help = "h" }',
      'counter { name = "rest_client_requests_total", help = "h" }',
    } do
      ok, err = pcall(w.env.load, w.env, p["a.lua"], text(decl, "a"))
      assert.is_false(ok, decl)
      assert.truthy(err:find(p["a.lua"] .. ":2: luaop.metrics.counter: name ", 1, true), decl .. ": " .. err)
      assert.truthy(err:find("the runtime's", 1, true), err)
    end
    -- the running version stays, its counter with it
    w.env:create(cm("y"))
    assert.are.equal(2, w.env:metric("shared_total"))
  end)

  it("keep a metric's series and values across a reload that declares it the same, and drop one it declares "
    .. "differently or no longer declares", function()
    local v1 = [[
local luaop = require "luaop"
local same = luaop.metrics.counter { name = "kept_total", help = "h", labels = { "k" } }
local changed = luaop.metrics.counter { name = "changed_total", help = "h" }
local gone = luaop.metrics.gauge { name = "gone_things", help = "h" }
return luaop.controller { name = "r", resource = "v1/ConfigMap",
  reconcile = function() same:inc({ k = "v" }) changed:inc() gone:set(nil, 7) end }
]]
    local v2 = [[
local luaop = require "luaop"
local same = luaop.metrics.counter { name = "kept_total", help = "h", labels = { "k" } }
local changed = luaop.metrics.counter { name = "changed_total", help = "another help" }
return luaop.controller { name = "r", resource = "v1/ConfigMap",
  reconcile = function(_, req) if req.name == "z" then same:inc({ k = "v" }) changed:inc() end end }
]]
    local p = load { ["r.lua"] = v1 }
    w.env = testing.env { scripts = { p["r.lua"] } }
    w.env:create(cm("x"))
    w.env:create(cm("y"))
    assert.are.equal(2, w.env:metric("kept_total", { k = "v" }))
    assert.are.equal(2, w.env:metric("changed_total"))
    assert.are.equal(7, w.env:metric("gone_things"))
    -- a version that fails to load (after declaring) changes nothing
    local ok = pcall(w.env.load, w.env, p["r.lua"], v2:gsub("return", "error('no')\nreturn", 1))
    assert.is_false(ok)
    assert.are.equal(2, w.env:metric("changed_total"))
    assert.are.equal(7, w.env:metric("gone_things"))
    w.env:load(p["r.lua"], v2) -- (its reload requeues x and y: nothing counts)
    w.env:create(cm("z"))
    assert.are.equal(3, w.env:metric("kept_total", { k = "v" }))
    assert.are.equal(1, w.env:metric("changed_total"))
    assert.truthy(core.metrics.text():find("# HELP changed_total another help\n", 1, true))
    assert.is_nil(w.env:metric("gone_things"))
    assert.is_nil(core.metrics.text():find("gone_things", 1, true))
  end)

  it("remove a script's metrics with the script, and show one declared in a reconcile at once", function()
    local p = load { ["lazy.lua"] = [[
local luaop = require "luaop"
return luaop.controller { name = "lazy", resource = "v1/ConfigMap",
  reconcile = function(_, req)
    luaop.metrics.gauge { name = "lazy_seen", help = "h", labels = { "name" } }:set({ name = req.name }, 1)
  end }
]] }
    w.env = testing.env { scripts = { p["lazy.lua"] } }
    w.env:create(cm("x"))
    assert.are.equal(1, w.env:metric("lazy_seen", { name = "x" }))
    local done = false
    core.task.spawn(function()
      assert(w.env.manager:set(p["lazy.lua"], {}))
      done = true
    end)
    w.env:run()
    assert.is_true(done)
    assert.is_nil(w.env:metric("lazy_seen", { name = "x" }))
    assert.is_nil(core.metrics.text():find("lazy_seen", 1, true))
  end)

  it("hold at most 1000 series a script: past the cap an update is dropped, counted and logged once", function()
    local p = load { ["many.lua"] = [[
local luaop = require "luaop"
local m = luaop.metrics.counter { name = "many_total", help = "h", labels = { "i" } }
for i = 1, 1005 do m:inc({ i = tostring(i) }) end
m:inc({ i = "1003" })
m:inc({ i = "1" }, 2)
return luaop.controller { name = "many", resource = "v1/ConfigMap", reconcile = function() end }
]] }
    w.env = testing.env { scripts = { p["many.lua"] } }
    assert.are.equal(script_metrics.SERIES, #samples("many_total"))
    assert.are.equal(3, w.env:metric("many_total", { i = "1" }))
    assert.is_nil(w.env:metric("many_total", { i = "1001" }))
    assert.are.equal(6, w.env:metric("luaop_script_series_dropped_total", { script = p["many.lua"] }))
    local logged = w.env:logs { msg = "metric series is dropped" }
    assert.are.equal(1, #logged)
    assert.are.equal("many_total", logged[1].fields.metric)
    local ok, out = promtool(core.metrics.text())
    assert.is_true(ok, out)
  end)

  it("go with the test kit's environment: the next one starts from none", function()
    local p = load { ["copier.lua"] = COPIER }
    w.env = testing.env { scripts = { p["copier.lua"] } }
    w.env:create(cm("a"))
    assert.are.equal(1, w.env:metric("copier_copies_total", { namespace = "default" }))
    w.env:stop()
    assert.is_nil(core.metrics.text():find("copier_", 1, true))
    w.env = testing.env { scripts = { p["copier.lua"] } }
    assert.is_nil(w.env:metric("copier_copies_total", { namespace = "default" }))
    w.env:create(cm("b"))
    assert.are.equal(1, w.env:metric("copier_copies_total", { namespace = "default" }))
  end)

  it("read in the test kit: the runtime's counters and histograms count from the environment's start", function()
    local p = load { ["copier.lua"] = COPIER }
    local reconciles = { controller = "copier", result = "success" }
    for _ = 1, 2 do -- the second env, the same controller name: its own counts only
      w.env = testing.env { scripts = { p["copier.lua"] } }
      assert.are.equal(0, w.env:metric("controller_runtime_reconcile_total", reconciles))
      assert.are.equal(0, w.env:metric("controller_runtime_reconcile_time_seconds_count", { controller = "copier" }))
      w.env:create(cm("a"))
      assert.are.equal(1, w.env:metric("controller_runtime_reconcile_total", reconciles))
      assert.are.equal(1, w.env:metric("controller_runtime_reconcile_time_seconds_count", { controller = "copier" }))
      assert.are.equal(1, w.env:metric("controller_runtime_reconcile_time_seconds_bucket",
        { controller = "copier", le = "+Inf" }))
      assert.are.equal(1, w.env:metric("copier_copies_total", { namespace = "default" }))
      w.env:stop()
    end
  end)

  it("count a module's declarations as its requiring script's own: a second script requiring it clashes", function()
    local p = load {
      ["counting.lib.lua"] = [[
local luaop = require "luaop"
local M = {}
M.seen = luaop.metrics.counter { name = "lib_seen_total", help = "h" }
return M
]],
      ["one.lua"] = [[
local luaop = require "luaop"
local counting = require "counting"
return luaop.controller { name = "one", resource = "v1/ConfigMap", reconcile = function() counting.seen:inc() end }
]],
      ["two.lua"] = [[
local luaop = require "luaop"
local counting = require "counting"
return luaop.controller { name = "two", resource = "v1/Secret", reconcile = function() end }
]] }
    w.env = testing.env { scripts = { p["one.lua"] } }
    w.env:create(cm("x"))
    assert.are.equal(1, w.env:metric("lib_seen_total"))
    local ok, err = pcall(w.env.load, w.env, p["two.lua"])
    assert.is_false(ok)
    assert.truthy(err:find(p["counting.lib.lua"] .. ":3: luaop.metrics.counter: metric lib_seen_total is declared by " ..
      p["one.lua"] .. " already", 1, true), err)
  end)

  it("are checked by luaop --check: a name promtool's lint refuses, and another script's name, at their lines",
    function()
    load {
      ["a.lua"] = "local luaop = require 'luaop'\nlocal m = luaop.metrics.counter { name = 'x_total', help = 'h' }\n" ..
        "return luaop.controller { name = 'a', resource = 'v1/ConfigMap', reconcile = function() m:inc() end }\n",
      ["b.lua"] = "local luaop = require 'luaop'\n\nlocal m = luaop.metrics.counter { name = 'x_total', help = 'h' }\n" ..
        "return luaop.controller { name = 'b', resource = 'v1/ConfigMap', reconcile = function() m:inc() end }\n",
      ["c.lua"] = "local luaop = require 'luaop'\nlocal m = luaop.metrics.gauge { name = 'c_latency_ms', help = 'h' }\n" ..
        "return luaop.controller { name = 'c', resource = 'v1/ConfigMap', reconcile = function() m:set(1) end }\n",
    }
    local code, out, err = proc.run({ "build/luaop", "--check", w.dir },
      { KUBECONFIG = false, HOME = "/nonexistent", KUBERNETES_SERVICE_HOST = false })
    assert.are.equal(1, code, out .. err)
    assert.are.equal(w.dir .. "/b.lua:3: luaop.metrics.counter: metric x_total is declared by " .. w.dir ..
      "/a.lua already (" .. w.dir .. "/a.lua:2): a metric belongs to one script\n" ..
      w.dir .. "/c.lua:2: luaop.metrics.gauge: name c_latency_ms has an abbreviated unit (ms): spell it out\n", out)
    assert.matches("3 scripts, 2 findings", err)
  end)

  it("show nothing a reconcile still running on a removed script declares or updates", function()
    local p = load { ["slow.lua"] = [[
local luaop = require "luaop"
local early = luaop.metrics.counter { name = "slow_early_total", help = "h" }
return luaop.controller { name = "slow", resource = "v1/ConfigMap",
  reconcile = function()
    early:inc()
    luaop.sleep(10)
    early:inc()
    luaop.metrics.gauge { name = "slow_late", help = "h" }:set(1)
    luaop.log:info("slow reconcile done")
  end }
]] }
    w.env = testing.env { scripts = { p["slow.lua"] } }
    w.env:create(cm("x"))
    assert.are.equal(1, w.env:metric("slow_early_total"))
    core.task.spawn(function() assert(w.env.manager:set(p["slow.lua"], {})) end)
    w.env:run()
    assert.is_nil(w.env:metric("slow_early_total"))
    w.env:advance(11)
    assert.are.equal(1, #w.env:logs { msg = "slow reconcile done" })
    assert.is_nil(core.metrics.text():find("slow_", 1, true))
    -- and the script loaded again starts from nothing, its late metric shown once its reconcile declares it
    w.env:load(p["slow.lua"])
    w.env:create(cm("y"))
    w.env:advance(25) -- (one worker: x's reconcile, then y's)
    assert.are.equal(4, w.env:metric("slow_early_total"))
    assert.are.equal(1, w.env:metric("slow_late"))
  end)
end)
