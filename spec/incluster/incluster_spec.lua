-- luaop as a Pod on the local control plane's real node (hack/node.sh: a
-- kubelet, kube-proxy, containerd and runc): the shipped manifests applied
-- with `kubectl apply -k` through a test overlay (spec/incluster/overlay:
-- the node's toleration and the imported image, nothing else), the image
-- built from the Dockerfile and imported into the node's containerd. The
-- Pods talk to the API server as any in-cluster client does: the projected
-- ServiceAccount token and the `kubernetes` Service's ClusterIP, which
-- kube-proxy's rules turn into the API server's endpoint. spec/run.sh runs
-- this last, when the machine has the real node (root).
local kube = require "support.kube"
local proc = require "support.proc"
local prometheus = require "support.prometheus"
local json = kube.json
local system = require "system"

local sh = proc.sh
local ns = "luaop-system"
local q = proc.quote

local function must(cmd, deadline)
  local ok, out = sh(cmd, deadline)
  if not ok then error(cmd .. " failed:\n" .. out, 2) end
  return out
end

local function pods()
  local items = kube.list("pods", ns, "-l", "app.kubernetes.io/name=luaop")
  local live = {}
  for _, p in ipairs(items) do
    if not p.metadata.deletionTimestamp then live[#live + 1] = p end
  end
  table.sort(live, function(a, b) return a.metadata.name < b.metadata.name end)
  return live
end

local function ready(p)
  for _, c in ipairs(p.status and p.status.conditions or {}) do
    if c.type == "Ready" then return c.status == "True" end
  end
  return false
end

-- Both replicas Running and Ready on the real node.
local function wait_ready(timeout)
  return kube.wait_for("two Ready luaop Pods", timeout or 120, function()
    local ps = pods()
    if #ps ~= 2 then return nil end
    for _, p in ipairs(ps) do
      if not ready(p) then return nil end
    end
    return ps
  end)
end

-- Who scrapes: a ServiceAccount bound to the manifests' luaop-metrics-reader
-- ClusterRole (the manifests serve /metrics over HTTPS to authorized
-- callers only, as kubebuilder v4's); its token's file, and a header file
-- for curl, made in the describe's setup.
local scraper = { ns = "default", name = "luaop-e2e-metrics-scraper" }

-- A Pod's /metrics, read from the machine (the Pods' range is routed to
-- the node) with the scraper's token, as text. (The certificate is the one
-- luaop makes for itself, as controller-runtime does: not verified here,
-- as kubebuilder's ServiceMonitor does not without cert-manager.)
local function scrape(pod)
  return must(("curl -sS --fail -m 5 -k -H @%s https://%s:8443/metrics"):format(q(scraper.header), pod.status.podIP))
end

local function metric(text, name, labels)
  local sum, found = 0, false
  for line in text:gmatch("[^\n]+") do
    local n, l, v = line:match("^([%w_:]+){?([^}]*)}? ([%d.e+-]+)$")
    if n == name and (not labels or l:find(labels, 1, true)) then
      sum, found = sum + tonumber(v), true
    end
  end
  return found and sum or nil
end

local function leader()
  local lease = kube.get("lease", "luaop", ns)
  local id = lease and lease.spec.holderIdentity
  return id and id:match("^(.-)_%x+$"), lease
end

-- The syncs luaop's Pods made, as the API server's audit log records them
-- (hack/kwok/audit-policy.yaml: luaop's ServiceAccounts' LISTs and
-- watches only), per resource: LISTs, and watches that stream the state
-- (sendInitialEvents, as luaop's informers sync), counted as they start.
local audit_log = "build/cluster/kwok/clusters/luaop/logs/audit.log"
local function lists()
  local counts = {}
  for line in io.lines(audit_log) do
    local e = json.decode(line)
    if e.user.username == "system:serviceaccount:luaop-system:luaop"
      and ((e.verb == "list" and e.stage == "ResponseComplete")
        or (e.verb == "watch" and e.stage == "ResponseStarted"
          and tostring(e.requestURI):find("sendInitialEvents=true", 1, true))) then
      local r = e.objectRef and e.objectRef.resource or "?"
      counts[r] = (counts[r] or 0) + 1
    end
  end
  return counts
end

-- The operators' ConfigMap with at.lua replaced by `text`, applied as a user
-- would (kubectl apply of the changed ConfigMap).
local function apply_at(text)
  local dir = proc.tempdir()
  must("cp operators/*.lua " .. q(dir))
  local f = assert(io.open(dir .. "/at.lua", "w"))
  f:write(text)
  f:close()
  local yaml = kube.must { "create", "configmap", "luaop-operators", "-n", ns, "--from-file=" .. dir,
    "--dry-run=client", "-o", "yaml" }
  must("rm -rf " .. q(dir))
  return kube.apply(yaml)
end

local read = proc.read

local function create_at(name)
  kube.apply(([[
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: %s, namespace: default}
spec: {schedule: "2020-01-01T00:00:00Z", command: "echo %s"}
]]):format(name, name))
end

local function at_done(name, timeout)
  return kube.wait_for("At " .. name .. " DONE", timeout or 60, function()
    local at = kube.get("at", name, "default")
    return at and at.status and at.status.phase == "DONE" and at
  end)
end

-- The notes of the Events regarding an object.
local function event_notes(kind, name, namespace)
  local out = kube.must { "get", "events.events.k8s.io", "-n", namespace, "-o", "json",
    "--field-selector", "regarding.kind=" .. kind .. ",regarding.name=" .. name }
  local notes = {}
  for _, e in ipairs(json.decode(out).items) do notes[#notes + 1] = (e.reason or "") .. ": " .. (e.note or "") end
  return table.concat(notes, "\n")
end

local function restarts(p)
  local n = 0
  for _, c in ipairs(p.status.containerStatuses or {}) do n = n + c.restartCount end
  return n
end

describe("luaop as a Pod on a real node", function()
  setup(function()
    -- the image from the Dockerfile (cached by its sources' hash), into the
    -- node's image store under the name the manifests use
    local log = "build/test/incluster-image.log"
    local ok = sh("hack/image.sh luaop:latest >" .. log .. " 2>&1 && hack/node.sh import luaop:latest >>" .. log .. " 2>&1",
      1800)
    assert(ok, "the image was not built or imported:\n" .. proc.tail(read(log), 40))
    -- (a namespace of the manifests still going from an earlier run would
    -- refuse their objects)
    for _, n in ipairs { ns, "secretsync" } do
      kube.wait_for("namespace " .. n .. " to finish terminating", 120, function()
        local o = kube.get("namespace", n)
        return not (o and o.metadata.deletionTimestamp)
      end)
    end
    -- the CRDs first, as a user would on a new cluster: in one apply, the
    -- samples can reach the API server before their kinds are served
    kube.must { "apply", "-k", "manifests/crds" }
    kube.must { "wait", "--for=condition=Established", "--timeout=60s", "-f", "manifests/crds/at.yaml",
      "-f", "manifests/crds/machine.yaml", "-f", "manifests/crds/switch.yaml" }
    kube.must { "apply", "-k", "spec/incluster/overlay" }
    kube.kubectl { "create", "serviceaccount", scraper.name, "-n", scraper.ns }
    kube.kubectl { "create", "clusterrolebinding", scraper.name, "--clusterrole", "luaop-metrics-reader",
      "--serviceaccount", scraper.ns .. ":" .. scraper.name }
    local token = kube.must { "create", "token", scraper.name, "-n", scraper.ns, "--duration", "2h" }:match("%S+")
    scraper.dir = proc.tempdir()
    scraper.token = proc.write(scraper.dir, "token", token)
    scraper.header = proc.write(scraper.dir, "header", "Authorization: Bearer " .. token .. "\n")
  end)

  teardown(function()
    -- the samples first, while the operators run: the secret copier's
    -- finalizer on the source Secret needs it (docs/deploy.md, uninstalling)
    kube.kubectl { "delete", "at", "--all", "-n", "default", "--timeout=60s" }
    kube.kubectl { "delete", "-k", "manifests/samples", "--ignore-not-found", "--timeout=60s" }
    kube.kubectl { "delete", "-k", "spec/incluster/overlay", "--wait=false", "--ignore-not-found" }
    kube.kubectl { "delete", "clusterrolebinding", scraper.name, "--ignore-not-found" }
    kube.kubectl { "delete", "serviceaccount", scraper.name, "-n", scraper.ns, "--ignore-not-found" }
    if scraper.dir then os.execute("rm -rf " .. q(scraper.dir)) end
  end)

  it("runs on a Ready real node beside kwok's, with a containerd runtime, tainted, and left alone by kwok", function()
    local real, fake = nil, 0
    for _, n in ipairs(kube.list("nodes")) do
      local annotations = n.metadata.annotations or {}
      if n.metadata.name == "luaop-node" then
        real = n
      elseif annotations["kwok.x-k8s.io/node"] == "fake" then
        fake = fake + 1
      end
    end
    assert(real, "no node luaop-node")
    assert.is_true(fake >= 1, "no kwok node beside it")
    assert.is_nil((real.metadata.annotations or {})["kwok.x-k8s.io/node"])
    assert.is_true(ready(real))
    assert.matches("^containerd://1%.", real.status.nodeInfo.containerRuntimeVersion)
    assert.matches("^v1%.", real.status.nodeInfo.kubeletVersion)
    assert.are.equal("10.251.0.2", real.status.addresses[1].address)
    assert.are.same({ { key = "luaop.dev/real-node", effect = "NoSchedule" } }, real.spec.taints)
    -- its heartbeat is the kubelet's own (kwok renews the Leases of the
    -- nodes it manages)
    local lease = kube.wait_for("the kubelet's node Lease", 30, function()
      return kube.get("lease", "luaop-node", "kube-node-lease")
    end)
    assert.are.equal("luaop-node", lease.spec.holderIdentity)
    local renewed = lease.spec.renewTime
    kube.wait_for("the kubelet to renew its node Lease", 30, function()
      return kube.get("lease", "luaop-node", "kube-node-lease").spec.renewTime ~= renewed
    end)
    -- and kwok's log never mentions it
    local kwok_log = read("build/cluster/kwok/clusters/luaop/logs/kwok-controller.log")
    assert.is_nil(kwok_log:find("luaop-node", 1, true), "kwok acted on the real node")
  end)

  it("becomes Ready through its readiness probe, both replicas on the real node", function()
    local ps = wait_ready(120)
    for _, p in ipairs(ps) do
      assert.are.equal("luaop-node", p.spec.nodeName)
      local c = p.spec.containers[1]
      assert.are.equal("/readyz", c.readinessProbe.httpGet.path)
      assert.are.equal("/healthz", c.livenessProbe.httpGet.path)
      assert.is_true(p.status.containerStatuses[1].ready)
      assert.is_truthy(p.status.containerStatuses[1].state.running)
      -- an address of the node's Pod range: the kubelet and CNI, not kwok
      assert.matches("^10%.252%.0%.%d+$", p.status.podIP)
    end
    local node = kube.get("node", "luaop-node")
    assert.matches("^containerd://", node.status.nodeInfo.containerRuntimeVersion)
  end)

  it("runs under runc with the manifests' security context: uid 65532, no capabilities, no new privileges, seccomp, a read-only root",
    function()
      local ps = wait_ready(120)
      local tasks = must("hack/node.sh ctr tasks ls")
      local containers = must("hack/node.sh ctr containers ls")
      local checked = 0
      for _, p in ipairs(ps) do
        local id = p.status.containerStatuses[1].containerID:match("^containerd://(%x+)$")
        assert(id, p.status.containerStatuses[1].containerID)
        assert.matches(id .. "%s+docker%.io/library/luaop:latest", containers)
        local pid = assert(tasks:match(id .. "%s+(%d+)%s+RUNNING"), "no running task " .. id .. " in:\n" .. tasks)
        local status = read("/proc/" .. pid .. "/status")
        assert.matches("\nUid:\t65532\t65532\t65532\t65532\n", status)
        assert.matches("\nGid:\t65532\t65532\t65532\t65532\n", status)
        assert.matches("\nCapEff:\t0000000000000000\n", status)
        assert.matches("\nCapPrm:\t0000000000000000\n", status)
        assert.matches("\nCapBnd:\t0000000000000000\n", status)
        assert.matches("\nNoNewPrivs:\t1\n", status)
        assert.matches("\nSeccomp:\t2\n", status) -- a filter (RuntimeDefault)
        local root = read("/proc/" .. pid .. "/mountinfo"):match("\n?%d+ %d+ %S+ %S+ / (%S+)")
        assert.matches("^ro", root or "", "the container's root is not read-only")
        -- and it is in the node's network, talking to the Service's ClusterIP
        local environ = read("/proc/" .. pid .. "/environ")
        assert.is_truthy(environ:find("KUBERNETES_SERVICE_HOST=10.0.0.1\0", 1, true))
        assert.is_truthy(environ:find("KUBERNETES_SERVICE_PORT=443\0", 1, true))
        checked = checked + 1
      end
      assert.are.equal(2, checked)
    end)

  it("keeps the Pods' traffic on the machine: the API server through the Service, with its TLS verified, and nothing else",
    function()
      local ps = wait_ready(120)
      local id = ps[1].status.containerStatuses[1].containerID:match("^containerd://(%x+)$")
      local pid = assert(must("hack/node.sh ctr tasks ls"):match(id .. "%s+(%d+)%s+RUNNING"))
      local in_pod = "nsenter --net=/proc/" .. pid .. "/ns/net -- "
      local ca = "build/cluster/kwok/clusters/luaop/pki/ca.crt"
      -- the ClusterIP, as in-cluster clients use it: kube-proxy's rules, and
      -- a certificate that names 10.0.0.1
      local code = must(in_pod .. "curl -sS -o /dev/null -w '%{http_code}' -m 10 --cacert " .. q(ca) ..
        " https://10.0.0.1:443/readyz")
      assert.matches("^[24]0[0-9]$", code)
      -- a server on every address of the machine: the machine reaches it,
      -- the Pod neither at the machine's own address nor at the veth's
      local addr = must("ip -4 -o addr show scope global | awk '$2 != \"luaop-h\" { sub(/\\/.*/, \"\", $4); print $4; exit }'")
        :match("[%d.]+")
      assert(addr, "the machine has no global IPv4 address to try")
      local port = proc.free_port("0.0.0.0")
      local _, stop_server = proc.background(("python3 -m http.server --bind 0.0.0.0 %d"):format(port))
      finally(stop_server)
      kube.wait_for("the machine to reach its own server", 10, function()
        return (sh(("curl -s -o /dev/null -m 2 http://%s:%d/"):format(addr, port)))
      end)
      for _, target in ipairs { addr, "10.251.0.1" } do
        local ok, out = sh(("%scurl -sS -o /dev/null -m 3 http://%s:%d/"):format(in_pod, target, port))
        assert.is_false(ok, "a Pod reached " .. target .. ":" .. port .. ": " .. out)
      end
      -- the node itself neither
      local ok, out = sh(("hack/node.sh exec curl -sS -o /dev/null -m 3 http://%s:%d/"):format(addr, port))
      assert.is_false(ok, "the node reached " .. addr .. ": " .. out)
      -- and the API server still listens on loopback only: not at the
      -- machine's address, not at the veth's but through the node's NAT
      local api_port = read(os.getenv("KUBECONFIG")):match("server: https://127%.0%.0%.1:(%d+)")
      assert(api_port, "no loopback server in the admin kubeconfig")
      for _, target in ipairs { addr, "10.251.0.1" } do
        ok, out = sh(("curl -sS -k -o /dev/null -m 3 https://%s:%s/readyz"):format(target, api_port))
        assert.is_false(ok, "the API server answered the machine at " .. target .. ": " .. out)
      end
    end)

  it("works on the projected ServiceAccount token: an At reaches DONE, a Machine converges, a Secret is copied",
    function()
      wait_ready(120)
      -- the samples the manifests carry
      at_done("example-at", 90)
      kube.wait_for("machine-1 converged: three switches, all down", 60, function()
        local m = kube.get("machine", "machine-1", "default")
        local sw = kube.list("switches", "default", "-l", "machine=machine-1")
        for _, s in ipairs(sw) do
          if s.spec.position ~= "down" or s.metadata.deletionTimestamp then return false end
        end
        return #sw == 3 and m.status and m.status.positions == "ddd"
      end)
      local target = kube.new_namespace("incluster-copy")
      finally(function() kube.delete_namespace(target) end)
      local copy = kube.wait_for("the shared Secret copied into " .. target, 60, function()
        return kube.get("secret", "shared-credentials", target)
      end)
      assert.are.equal(read("manifests/samples/secret.yaml"):match("password: (%S+)"),
        must("printf %s " .. q(copy.data.password) .. " | base64 -d"))
      -- the Pods hold no credential but the projected token
      local p = pods()[1]
      local found
      for _, v in ipairs(p.spec.volumes) do
        for _, s in ipairs(v.projected and v.projected.sources or {}) do
          if s.serviceAccountToken then found = s.serviceAccountToken end
        end
      end
      assert.is_truthy(found, "no projected ServiceAccount token in the Pod")
    end)

  it("serves a changed ConfigMap's script without a restart and without a new LIST", function()
    local ps = wait_ready(120)
    local original = read("operators/at.lua")
    local changed, n = original:gsub('ctx:event%(at, "Normal", "Done", "pod "', 'ctx:event(at, "Normal", "Done", "v2: pod "')
    assert.are.equal(1, n, "at.lua changed: the spec's edit no longer applies")
    local before_lists = lists()
    local before = {}
    for _, p in ipairs(ps) do
      before[p.metadata.name] = metric(scrape(p), "luaop_script_reloads_total", 'result="success"') or 0
    end
    local t0 = system.gettime()
    apply_at(changed)
    for _, p in ipairs(ps) do
      kube.wait_for("Pod " .. p.metadata.name .. " to load the new at.lua", 60, function()
        local text = scrape(p)
        local v = metric(text, "luaop_script_reloads_total", 'at.lua",result="success"') or 0
        return v > 0 and (metric(text, "luaop_script_reloads_total", 'result="success"') or 0) >
          before[p.metadata.name]
      end)
    end
    print(("# ConfigMap applied -> both Pods reloaded: %.1f s (the spec's node syncs every 5 s)"):format(system.gettime() - t0))
    create_at("incluster-reloaded")
    at_done("incluster-reloaded")
    kube.wait_for("the new script's Event", 30, function()
      return event_notes("At", "incluster-reloaded", "default"):find("Done: v2: pod incluster-reloaded-pod", 1, true)
    end)
    assert.is_truthy(next(before_lists), "no sync (LIST or streamed) of luaop's in the audit log at all")
    assert.are.same(before_lists, lists())
    for _, p in ipairs(pods()) do
      assert.are.equal(0, restarts(p), p.metadata.name .. " restarted")
      assert.is_truthy(before[p.metadata.name], "a Pod was replaced: " .. p.metadata.name)
    end
  end)

  it("keeps serving when the ConfigMap's script is broken: the error in its log, an Event and a metric", function()
    local ps = wait_ready(120)
    local good = read("operators/at.lua")
    finally(function()
      kube.must { "apply", "-k", "spec/incluster/overlay" }
    end)
    local broken = good:gsub("\nreturn ", "\nreturn return ", 1)
    apply_at(broken)
    for _, p in ipairs(ps) do
      kube.wait_for("Pod " .. p.metadata.name .. " to count the failed load", 60, function()
        return (metric(scrape(p), "luaop_script_reloads_total", 'at.lua",result="error"') or 0) > 0
      end)
      local logs = kube.must { "logs", "-n", ns, p.metadata.name }
      assert.matches("script reload failed[^\n]*at%.lua:%d+:", logs)
    end
    -- the Event comes from the leader: a standby writes nothing but its
    -- Lease (docs/leader-election.md)
    local name = leader()
    kube.wait_for("a ScriptLoadFailed Event on " .. name, 30, function()
      return event_notes("Pod", name, ns):find("ScriptLoadFailed: [^\n]*at%.lua:%d+")
    end)
    -- the version loaded before still reconciles
    create_at("incluster-kept")
    at_done("incluster-kept")
    for _, p in ipairs(pods()) do
      assert.are.equal(0, restarts(p), p.metadata.name .. " restarted")
      assert.is_true(ready(p))
    end
  end)

  it("is scraped by a real Prometheus at the Pods' addresses, over HTTPS with a metrics-reader's token", function()
    local ps = wait_ready(120)
    -- Debian's Prometheus has no Kubernetes service discovery built in: the
    -- targets are the Pods' addresses and container ports as the API server
    -- gives them, which is what that discovery would find
    local targets = {}
    for _, p in ipairs(ps) do
      local port
      for _, cp in ipairs(p.spec.containers[1].ports) do
        if cp.name == "metrics" then port = cp.containerPort end
      end
      targets[#targets + 1] = ('{targets: ["%s:%d"], labels: {pod: %s}}'):format(p.status.podIP, port, p.metadata.name)
    end
    -- over HTTPS with the scraper's token, as a ServiceMonitor of
    -- kubebuilder's (insecureSkipVerify without cert-manager) scrapes
    local prom = prometheus.start(table.concat(targets, ", "),
      ("  scheme: https\n  tls_config: {insecure_skip_verify: true}\n  authorization: {credentials_file: %s}\n")
        :format(scraper.token))
    finally(prom.stop)
    local base = prom.base .. "/api/v1/query?query="
    kube.wait_for("Prometheus to scrape both Pods", 60, function()
      local ok, out = sh("curl -s -m 5 " .. q(base .. "sum(up%7Bjob%3D%22luaop%22%7D)"))
      return ok and out:match('"value":%[[%d.]+,"2"%]')
    end)
    local name = leader()
    local answer = kube.wait_for("the leader's reconciles in Prometheus", 60, function()
      local ok, out = sh("curl -s -m 5 " .. q(base .. "controller_runtime_reconcile_total%7Bpod%3D%22" .. name ..
        "%22%2Ccontroller%3D%22at%22%7D"))
      return ok and out:match('"value":%[[%d.]+,"[1-9]%d*"%]') and out
    end)
    assert.matches('"job":"luaop"', answer)
    local ok, scraped = sh("curl -s -m 5 " .. prom.base .. "/api/v1/targets")
    assert.is_true(ok, scraped)
    assert.is_nil(scraped:find('"health":"down"', 1, true), scraped)
    assert.is_nil(scraped:find('"lastError":"[^"]', 1), scraped)
    -- and no one else: no token 401, as kubebuilder's
    local _, code = sh(("curl -s -k -m 5 -o /dev/null -w '%%{http_code}' https://%s:8443/metrics"):format(ps[1].status.podIP))
    assert.are.equal("401", code)
  end)

  it("refuses to start a node beside a kubelet of someone else's, naming it", function()
    -- beside its own node, the check passes
    local ok, out = sh("hack/node.sh check 2>&1")
    assert.is_true(ok, out)
    local dir = proc.tempdir()
    finally(function() sh("rm -rf " .. q(dir)) end)
    must("cp \"$(command -v sleep)\" " .. q(dir .. "/kubelet"))
    local pid = must(q(dir .. "/kubelet") .. " 60 >/dev/null 2>&1 & echo $!"):match("%d+")
    finally(function() sh("kill " .. pid .. " 2>/dev/null") end)
    ok, out = sh("hack/node.sh check 2>&1")
    assert.is_false(ok, out)
    assert.matches("refusing to start a node here: a kubelet runs on this machine already %(pid " .. pid .. ": " ..
      dir:gsub("%p", "%%%0") .. "/kubelet 60", out)
  end)

  it("hands over to the other replica when the leader's Pod is deleted", function()
    local ps = wait_ready(120)
    local old = kube.wait_for("a leader", 30, function() return leader() end)
    local other
    for _, p in ipairs(ps) do
      if p.metadata.name ~= old then other = p.metadata.name end
    end
    assert(other, "the leader " .. old .. " is not one of the two Pods")
    -- the replacement the Deployment makes waits (Pending) until the other
    -- replica has taken over: else it may start within the standby's retry
    -- period and win the Lease itself
    kube.must { "cordon", "luaop-node" }
    finally(function() kube.kubectl { "uncordon", "luaop-node" } end)
    local t0 = system.gettime()
    kube.must { "delete", "pod", old, "-n", ns, "--wait=false" }
    local new = kube.wait_for("the other replica to lead", 30, function()
      local n = leader()
      return n ~= old and n
    end)
    local _, lease = leader()
    print(("# leader Pod deleted -> the other replica leads: %.1f s"):format(system.gettime() - t0))
    assert.are.equal(other, new)
    assert.is_true((lease.spec.leaseTransitions or 0) >= 1)
    create_at("incluster-handover")
    local at = at_done("incluster-handover")
    assert.are.equal("DONE", at.status.phase)
    -- the Deployment's replacement for the deleted Pod starts and stands by
    kube.must { "uncordon", "luaop-node" }
    wait_ready(120)
    assert.are.equal(new, (leader()))
  end)
end)
