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
end)
