-- A real Prometheus server (Debian's) scrapes luaop's /metrics while luaop
-- reconciles on the local control plane, and the spec reads
-- controller_runtime_reconcile_total back through Prometheus's HTTP API.
local kube = require "support.kube"
local luaop = require "support.luaop"
local volume = require "support.volume"
local proc = require "support.proc"
local prometheus = require "support.prometheus"

describe("Prometheus", function()
  it("scrapes luaop and answers controller_runtime_reconcile_total back through its HTTP API", function()
    local ns = kube.new_namespace("e2e-prom")
    finally(function() kube.delete_namespace(ns) end)
    for i = 1, 3 do
      kube.must { "create", "configmap", "cm-" .. i, "-n", ns, "--from-literal=k=v" }
    end
    local v = volume.new { ["counted.lua"] = ([[
local luaop = require "luaop"
return luaop.controller {
  name = "counted", resource = "v1/ConfigMap", namespace = %q,
  reconcile = function(ctx, req) ctx.log:info("counted") end,
}
]]):format(ns) }
    finally(function() v:remove() end)
    local run = luaop.start({ v.dir }, { flags = { "--metrics-bind-address", "127.0.0.1:0" } })
    finally(run.cleanup)
    local mport = tonumber(kube.wait_for("the metrics port", 10, function()
      return run.stderr():match('Serving metrics server\t{[^}]*"port": (%d+)')
    end))

    local prom = prometheus.start(('{targets: ["127.0.0.1:%d"]}'):format(mport))
    finally(prom.stop)

    local query = prom.base .. "/api/v1/query?query=" ..
      'controller_runtime_reconcile_total%7Bcontroller%3D%22counted%22%2Cresult%3D%22success%22%7D'
    local answer = kube.wait_for("Prometheus to have scraped three reconciles", 60, function()
      local ok, out = proc.sh("curl -s -m 5 " .. proc.quote(query))
      local value = ok and out:match('"value":%[[%d.]+,"(%d+)"%]')
      return value and tonumber(value) >= 3 and out
    end)
    assert.matches('"status":"success"', answer)
    assert.matches('"job":"luaop"', answer)
    -- and the target is up, with nothing Prometheus could not parse
    local ok, targets = proc.sh("curl -s -m 5 " .. prom.base .. "/api/v1/targets")
    assert.is_true(ok, targets)
    assert.matches('"health":"up"', targets)
    assert.matches('"lastError":""', targets)
    assert.is_nil(prom.log():find("level=error", 1, true), prom.log())
    run.stop()
  end)
end)
