-- A real Prometheus server (Debian's) scrapes luaop's /metrics while luaop
-- reconciles on the local control plane, and the spec reads
-- controller_runtime_reconcile_total back through Prometheus's HTTP API.
local kube = require "support.kube"
local luaop = require "support.luaop"
local volume = require "support.volume"
local proc = require "support.proc"

-- A port free on 127.0.0.1 now (Prometheus cannot report a port 0 it got).
local function free_port()
  local ok, out = proc.sh([[python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])']])
  assert(ok, out)
  return tonumber(out)
end

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

    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. proc.quote(dir)))
    finally(function() os.execute("rm -rf " .. proc.quote(dir)) end)
    local f = assert(io.open(dir .. "/prometheus.yml", "w"))
    f:write(([[
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
- job_name: luaop
  static_configs: [{targets: ["127.0.0.1:%d"]}]
]]):format(mport))
    f:close()
    local pport = free_port()
    local p = assert(io.popen(("prometheus --config.file=%s --storage.tsdb.path=%s --web.listen-address=127.0.0.1:%d " ..
      ">%s 2>&1 & echo $!"):format(proc.quote(dir .. "/prometheus.yml"), proc.quote(dir .. "/data"), pport,
      proc.quote(dir .. "/log"))))
    local pid = p:read("l")
    p:close()
    finally(function() os.execute("kill " .. pid .. " 2>/dev/null; sleep 0.2; kill -9 " .. pid .. " 2>/dev/null") end)

    local query = ("http://127.0.0.1:%d/api/v1/query?query=%s"):format(pport,
      'controller_runtime_reconcile_total%7Bcontroller%3D%22counted%22%2Cresult%3D%22success%22%7D')
    local answer = kube.wait_for("Prometheus to have scraped three reconciles", 60, function()
      local ok, out = proc.sh("curl -s -m 5 " .. proc.quote(query))
      local value = ok and out:match('"value":%[[%d.]+,"(%d+)"%]')
      return value and tonumber(value) >= 3 and out
    end)
    assert.matches('"status":"success"', answer)
    assert.matches('"job":"luaop"', answer)
    -- and the target is up, with nothing Prometheus could not parse
    local ok, targets = proc.sh(("curl -s -m 5 http://127.0.0.1:%d/api/v1/targets"):format(pport))
    assert.is_true(ok, targets)
    assert.matches('"health":"up"', targets)
    assert.matches('"lastError":""', targets)
    assert.is_nil(proc.read(dir .. "/log"):find("level=error", 1, true), proc.read(dir .. "/log"))
    run.stop()
  end)
end)
