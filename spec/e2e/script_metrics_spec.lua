-- A script's own metrics (luaop.metrics) on the real API server: luaop
-- runs a script that counts its reconciles in a counter of its own, and
-- /metrics shows it beside the runtime's, in a text promtool accepts; a
-- reload that declares it the same keeps its value, one that declares a
-- runtime's name is refused and the running version stays, and the
-- script's removal takes its metrics.
local kube = require "support.kube"
local luaop = require "support.luaop"
local volume = require "support.volume"
local proc = require "support.proc"

-- The value of one sample line (name{labels} exactly), or nil.
local function sample(text, series)
  for line in text:gmatch("[^\n]+") do
    if line:sub(1, #series + 1) == series .. " " then return tonumber(line:sub(#series + 2)) end
  end
end

local function promtool(text)
  local file = os.tmpname()
  local f = assert(io.open(file, "w"))
  f:write(text)
  f:close()
  local ok, out = proc.sh("promtool check metrics < " .. proc.quote(file))
  os.remove(file)
  return ok, out
end

local function counted(ns, extra)
  return ([[
local luaop = require "luaop"
local reconciles = luaop.metrics.counter { name = "counted_reconciles_total", help = "Reconciles of counted",
  labels = { "namespace" } }
local keys = luaop.metrics.histogram { name = "counted_keys", help = "Keys per ConfigMap", buckets = { 1, 2 } }
%s
return luaop.controller {
  name = "counted", resource = "v1/ConfigMap", namespace = %q,
  reconcile = function(ctx, req)
    local obj = ctx:get("ConfigMap", req)
    reconciles:inc({ namespace = req.namespace })
    local n = 0
    for _ in pairs(obj and obj.data or {}) do n = n + 1 end
    keys:observe(nil, n)
    ctx.log:info("counted")
  end,
}
]]):format(extra or "", ns)
end

describe("a script's own metrics on the real API server", function()
  it("count a script's reconciles in its own counter, shown at /metrics in a text promtool accepts, kept across "
    .. "a reload that declares it the same, and gone with the script", function()
    local ns = kube.new_namespace("e2e-smetrics")
    finally(function() kube.delete_namespace(ns) end)
    for i = 1, 3 do
      kube.must { "create", "configmap", "cm-" .. i, "-n", ns, "--from-literal=k=v" }
    end
    local v = volume.new { ["counted.lua"] = counted(ns) }
    finally(function() v:remove() end)
    local run = luaop.start({ v.dir }, { flags = { "--metrics-bind-address", "127.0.0.1:0" } })
    finally(run.cleanup)
    local url = "http://127.0.0.1:" .. kube.wait_for("the metrics port", 10, function()
      return run.stderr():match('Serving metrics server\t{[^}]*"port": (%d+)')
    end) .. "/metrics"
    local series = ('counted_reconciles_total{namespace="%s"}'):format(ns)
    local text = kube.wait_for("three reconciles counted", 30, function()
      local code, body = proc.http(url)
      return code == 200 and (sample(body, series) or 0) >= 3 and body
    end)
    assert.are.equal(sample(text, 'controller_runtime_reconcile_total{controller="counted",result="success"}'),
      sample(text, series))
    assert.truthy(text:find("# HELP counted_reconciles_total Reconciles of counted\n# TYPE counted_reconciles_total " ..
      "counter\n", 1, true), text)
    assert.are.equal(sample(text, series), sample(text, "counted_keys_bucket{le=\"1\"}"))
    local ok, out = promtool(text)
    assert.is_true(ok, out)
    local before = sample(text, series)

    -- a reload that declares a runtime's name fails; the running version and its counter stay
    v:update { ["counted.lua"] = counted(ns, 'luaop.metrics.gauge { name = "workqueue_depth", help = "mine" }') }
    kube.wait_for("the refused reload logged", 20, function()
      return run.stderr():find("script reload failed, the running version stays", 1, true)
    end)
    assert.truthy(run.stderr():find("counted.lua:5: luaop.metrics.gauge: name workqueue_depth is the runtime's", 1,
      true), run.stderr())
    kube.must { "create", "configmap", "cm-4", "-n", ns, "--from-literal=k=v" }
    kube.wait_for("cm-4 counted by the running version", 30, function()
      local _, body = proc.http(url)
      return (sample(body, series) or 0) >= before + 1
    end)

    -- a reload that declares it the same keeps its series: the reload's requeue counts on from there
    local _, now = proc.http(url)
    local kept = sample(now, series)
    v:update { ["counted.lua"] = counted(ns, "-- a new version") }
    kube.wait_for("the reload", 20, function() return run.stderr():find("script reloaded", 1, true) end)
    kube.wait_for("the reload's requeue counted on", 30, function()
      local _, body = proc.http(url)
      return (sample(body, series) or 0) >= kept + 4
    end)

    -- the script's removal takes its metrics
    v:update {}
    kube.wait_for("the script removed", 20, function()
      return run.stderr():find("script removed, its controllers stopped", 1, true)
    end)
    local _, gone = proc.http(url)
    assert.is_nil(gone:find("counted_", 1, true), gone)
    ok, out = promtool(gone)
    assert.is_true(ok, out)
    run.stop()
  end)
end)
