-- --metrics-secure on the local control plane: luaop serves /metrics over
-- HTTPS (its certificate from --metrics-cert-path), each scrape checked by
-- a TokenReview and a SubjectAccessReview the real API server answers; the
-- ServiceAccount bound to the repository's metrics-reader ClusterRole
-- scrapes (curl, and a real Prometheus with its token), one without it is
-- refused 403, no token or a bad one 401.
local kube = require "support.kube"
local luaop = require "support.luaop"
local volume = require "support.volume"
local proc = require "support.proc"
local prometheus = require "support.prometheus"

local q = proc.quote

describe("secure metrics", function()
  it("are scraped with a metrics-reader token, refused 403 without the role and 401 without a token, as kubebuilder's",
    function()
    local ns = kube.new_namespace("e2e-msec")
    finally(function() kube.delete_namespace(ns) end)
    -- the repository's ClusterRole under a name of this run's, bound to one ServiceAccount of two
    local role = io.open("manifests/rbac/metrics_reader_role.yaml"):read("a")
      :gsub("name: luaop%-metrics%-reader", "name: " .. ns .. "-metrics-reader")
    kube.apply(role)
    finally(function()
      kube.kubectl { "delete", "clusterrole", ns .. "-metrics-reader", "--ignore-not-found" }
      kube.kubectl { "delete", "clusterrolebinding", ns .. "-metrics-reader", "--ignore-not-found" }
    end)
    kube.must { "create", "serviceaccount", "reader", "-n", ns }
    kube.must { "create", "serviceaccount", "nobody", "-n", ns }
    kube.must { "create", "clusterrolebinding", ns .. "-metrics-reader", "--clusterrole", ns .. "-metrics-reader",
      "--serviceaccount", ns .. ":reader" }
    local reader = kube.must { "create", "token", "reader", "-n", ns }:match("%S+")
    local nobody = kube.must { "create", "token", "nobody", "-n", ns }:match("%S+")
    -- a CA and a serving certificate for 127.0.0.1
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. q(dir)) end)
    local ok, out = proc.sh(table.concat({ "cd " .. q(dir),
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt"
        .. " -subj /CN=e2e-msec-ca -days 1",
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout tls.key -out tls.csr"
        .. " -subj /CN=localhost",
      "printf 'subjectAltName=IP:127.0.0.1\\n' >ext",
      "openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days 1 -extfile ext",
    }, " && ") .. " 2>&1")
    assert(ok, out)
    local f = assert(io.open(dir .. "/token", "w"))
    f:write(reader)
    f:close()

    kube.must { "create", "configmap", "cm-1", "-n", ns, "--from-literal=k=v" }
    local v = volume.new { ["counted.lua"] = ([[
local luaop = require "luaop"
return luaop.controller {
  name = "counted", resource = "v1/ConfigMap", namespace = %q,
  reconcile = function(ctx, req) ctx.log:info("counted") end,
}
]]):format(ns) }
    finally(function() v:remove() end)
    local run = luaop.start({ v.dir }, { flags = { "--metrics-bind-address", "127.0.0.1:0", "--metrics-secure",
      "--metrics-cert-path", dir } })
    finally(run.cleanup)
    local port = tonumber(kube.wait_for("the secure metrics port", 20, function()
      return run.stderr():match('Serving metrics server\t{[^}]*"port": (%d+), "secure": true')
    end))

    local function scrape(token)
      local body = os.tmpname()
      local _, code = proc.sh(("curl -sS --cacert %s %s -o %s -w '%%{http_code}' https://127.0.0.1:%d/metrics")
        :format(q(dir .. "/ca.crt"), token and ("-H " .. q("Authorization: Bearer " .. token)) or "", q(body), port))
      local text = proc.read(body)
      os.remove(body)
      return tonumber(code), text
    end
    -- (200 with the registry's text, once the reconcile is in it)
    local last
    local waited, text = pcall(kube.wait_for, "a reconcile counted", 30, function()
      local c, t = scrape(reader)
      last = c .. " " .. t:sub(1, 300) .. "\n" .. run.stderr()
      return c == 200 and t:find('controller_runtime_reconcile_total{controller="counted",result="success"} [1-9]')
        and t
    end)
    assert(waited, tostring(text) .. "; last: " .. tostring(last))
    assert.matches("# TYPE workqueue_adds_total counter", text, 1, true)
    assert.are.same({ 403, "Authorization denied for user system:serviceaccount:" .. ns .. ":nobody\n" },
      { scrape(nobody) })
    assert.are.same({ 401, "Unauthorized\n" }, { scrape(nil) })
    assert.are.same({ 401, "Unauthorized\n" }, { scrape("not-a-token") })
    -- no plain HTTP there
    local _, plain = proc.sh(("curl -sS -m 5 http://127.0.0.1:%d/metrics 2>&1"):format(port))
    assert.matches("Client sent an HTTP request to an HTTPS server", plain, 1, true)

    -- Prometheus, with the reader's token and the CA
    local prom = prometheus.start(('{targets: ["127.0.0.1:%d"]}'):format(port),
      ("  scheme: https\n  tls_config: {ca_file: %s}\n  authorization: {credentials_file: %s}\n")
        :format(dir .. "/ca.crt", dir .. "/token"))
    finally(prom.stop)
    local query = prom.base .. "/api/v1/query?query=" ..
      'controller_runtime_reconcile_total%7Bcontroller%3D%22counted%22%2Cresult%3D%22success%22%7D'
    kube.wait_for("Prometheus to have scraped the reconcile", 60, function()
      local qok, qout = proc.sh("curl -s -m 5 " .. q(query))
      return qok and qout:match('"value":%[[%d.]+,"[1-9]%d*"%]')
    end)
    local tok, targets = proc.sh("curl -s -m 5 " .. prom.base .. "/api/v1/targets")
    assert.is_true(tok, targets)
    assert.matches('"health":"up"', targets)
    assert.matches('"scrapeUrl":"https://', targets)
    run.stop()
  end)

  it("are served by a standby too: its reviews leave while the leader election's fence holds its writes back",
    function()
    -- a replica that does not lead (the Lease is another's for an hour)
    -- answers its scrapes as the leader does: a TokenReview and a
    -- SubjectAccessReview change nothing, so the fence lets them out
    local ns = kube.new_namespace("e2e-msec-standby")
    finally(function() kube.delete_namespace(ns) end)
    local role = io.open("manifests/rbac/metrics_reader_role.yaml"):read("a")
      :gsub("name: luaop%-metrics%-reader", "name: " .. ns .. "-metrics-reader")
    kube.apply(role)
    finally(function()
      kube.kubectl { "delete", "clusterrole", ns .. "-metrics-reader", "--ignore-not-found" }
      kube.kubectl { "delete", "clusterrolebinding", ns .. "-metrics-reader", "--ignore-not-found" }
    end)
    kube.must { "create", "serviceaccount", "reader", "-n", ns }
    kube.must { "create", "clusterrolebinding", ns .. "-metrics-reader", "--clusterrole", ns .. "-metrics-reader",
      "--serviceaccount", ns .. ":reader" }
    local reader = kube.must { "create", "token", "reader", "-n", ns }:match("%S+")
    kube.apply(([[{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
      "metadata": {"name": "standby", "namespace": "%s"},
      "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600,
        "acquireTime": "%s", "renewTime": "%s"}}]]):format(ns, os.date("!%Y-%m-%dT%H:%M:%S.000000Z"),
      os.date("!%Y-%m-%dT%H:%M:%S.000000Z")))
    local v = volume.new { ["idle.lua"] = ([[
local luaop = require "luaop"
return luaop.controller { name = "idle", resource = "v1/ConfigMap", namespace = %q, reconcile = function() end }
]]):format(ns) }
    finally(function() v:remove() end)
    local run = luaop.start({ v.dir }, { flags = { "--metrics-bind-address", "127.0.0.1:0", "--metrics-secure",
      "--leader-elect", "--leader-election-id", "standby", "--leader-election-namespace", ns } })
    finally(run.cleanup)
    local port = tonumber(kube.wait_for("the secure metrics port", 20, function()
      return run.stderr():match('Serving metrics server\t{[^}]*"port": (%d+), "secure": true')
    end))
    kube.wait_for("the standby trying for the lease", 20, function()
      return run.stderr():find("attempting to acquire leader lease", 1, true)
    end)
    local body = os.tmpname()
    finally(function() os.remove(body) end)
    local _, code = proc.sh(("curl -sS -k -H %s -o %s -w '%%{http_code}' https://127.0.0.1:%d/metrics"):format(
      q("Authorization: Bearer " .. reader), q(body), port))
    assert.are.equal("200", code, proc.read(body) .. "\n" .. run.stderr())
    assert.matches('leader_election_master_status{name="standby"} 0', proc.read(body), 1, true)
    assert.is_nil(run.stderr():find("successfully acquired lease", 1, true))
    run.stop()
  end)
end)
