-- The four example operators (operators/*.lua), run together from their
-- directory as they are deployed, against the local control plane with the
-- CRDs of manifests/crds installed: every behaviour of their contracts.
--
-- Twice: as the cluster admin, and as the manifests' ServiceAccount with
-- only its ClusterRole (a token from the TokenRequest API), which proves
-- the RBAC rules are enough.
local kube = require "support.kube"
local luaop = require "support.luaop"
local json = require "luaop.core".json

-- A kubeconfig for the manifests' ServiceAccount; returns its path.
local function service_account_kubeconfig()
  kube.must { "apply", "-k", "manifests/rbac" }
  local token = kube.must({ "create", "token", "luaop", "-n", "luaop-system", "--duration=1h" }):gsub("%s+$", "")
  local cfg = json.decode(kube.must { "config", "view", "--raw", "--minify", "-o", "json" })
  local cluster = cfg.clusters[1].cluster
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(json.encode {
    apiVersion = "v1", kind = "Config", ["current-context"] = "sa",
    clusters = { { name = "c", cluster = { server = cluster.server, ["certificate-authority"] = cluster["certificate-authority"],
      ["certificate-authority-data"] = cluster["certificate-authority-data"] } } },
    users = { { name = "sa", user = { token = token } } },
    contexts = { { name = "sa", context = { cluster = "c", user = "sa", namespace = "luaop-system" } } },
  })
  f:close()
  return path
end

local time = require("luaop").time

-- Wait until the events.k8s.io/v1 Events about object `name` in namespace
-- ns include every reason of `reasons` (written by tasks of their own).
local function wait_events(ns, name, reasons)
  kube.wait_for(table.concat(reasons, ", ") .. " Events on " .. name, 30, function()
    local seen = {}
    for _, e in ipairs(kube.list("events.v1.events.k8s.io", ns)) do
      if e.regarding and e.regarding.name == name then seen[e.reason] = e end
    end
    for _, r in ipairs(reasons) do
      if not seen[r] then return false end
    end
    return seen
  end)
end

local function utc(offset)
  return time.format(os.time() + offset)
end

for _, as in ipairs { "the cluster admin", "the manifests' ServiceAccount" } do
describe("the example operators, as " .. as .. ",", function()
  local ns, run, kubeconfig

  setup(function()
    kube.must { "apply", "-k", "manifests/crds" }
    kube.must { "wait", "--for", "condition=Established", "crd", "--all", "--timeout=30s" }
    ns = kube.new_namespace("e2e-ops")
    local flags
    if as ~= "the cluster admin" then
      kubeconfig = service_account_kubeconfig()
      -- as the Deployment runs it: leader election on (its Lease in
      -- luaop-system, which the ServiceAccount's Role covers)
      flags = { "--leader-elect", "--leader-election-id", "luaop", "--leader-election-namespace", "luaop-system",
        "--leader-elect-retry-period", "0.5s" }
    end
    run = luaop.start({ "operators" }, { kubeconfig = kubeconfig, flags = flags })
    kube.wait_for("caches synced", 30, function() return run.stderr():find("caches synced", 1, true) end)
    if flags then
      -- a Lease left by an earlier run expires within its 15 s
      kube.wait_for("the lease", 30, function() return run.stderr():find("successfully acquired lease", 1, true) end)
    end
  end)

  teardown(function()
    if run then
      run.stop()
      local err = run.stderr()
      run.cleanup()
      if as ~= "the cluster admin" then assert.matches("released the leader lease", err) end
      -- nothing was refused (RBAC: a create in a namespace being deleted
      -- is Forbidden too, and another spec's may still be terminating)
      for line in err:gmatch("[^\n]*Forbidden[^\n]*") do
        assert.matches("because it is being terminated", line)
      end
    end
    if kubeconfig then os.remove(kubeconfig) end
    if ns then kube.delete_namespace(ns) end
  end)

  local function apply(yaml)
    kube.must({ "apply", "-n", ns, "-f", "-" }, yaml)
  end

  local function get(kind, name)
    return kube.get(kind, name, ns)
  end

  describe("At", function()
    it("runs an At whose time has passed, through RUNNING, to DONE", function()
      local phases = kube.watch { "get", "ats", "-n", ns, "-o", "jsonpath={.metadata.name} {.status.phase}{\"\\n\"}" }
      finally(phases.stop)
      -- an At far in the future first: once the watch shows it, the watch
      -- is open and cannot miss past's first phase
      apply(([[
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: watch-open}
spec: {schedule: "%s", command: "echo never"}
]]):format(utc(86400)))
      kube.wait_for("the watch to be open", 30, function()
        return table.concat(phases.lines(), "\n"):find("watch-open", 1, true)
      end)
      apply(([[
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: past}
spec: {schedule: "%s", command: "echo YAY"}
]]):format(utc(-3600)))
      kube.wait_for("past DONE", 60, function()
        local at = get("at", "past")
        return at and at.status and at.status.phase == "DONE"
      end)
      local pod = get("pod", "past-pod")
      assert.are.equal("Succeeded", pod.status.phase)
      assert.are.same({ "echo", "YAY" }, pod.spec.containers[1].command)
      assert.are.equal("At", pod.metadata.ownerReferences[1].kind)
      assert.is_true(pod.metadata.ownerReferences[1].controller)
      local seen = table.concat(phases.lines(), ",")
      assert.matches("past PENDING.*past RUNNING.*past DONE", seen)
      -- what kubectl events says of it
      wait_events(ns, "past", { "Scheduled", "PodCreated", "Done" })
    end)

    it("gives an At a Ready condition the API server keeps, so that kubectl wait --for=condition=Ready " ..
      "waits for its Pod to have run", function()
      apply(([[
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: later}
spec: {schedule: "%s", command: "echo later"}
---
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: ready}
spec: {schedule: "%s", command: "echo ready"}
]]):format(utc(86400), utc(-60)))
      kube.must { "wait", "-n", ns, "--for=condition=Ready", "at/ready", "--timeout=60s" }
      local at = get("at", "ready")
      assert.are.equal("DONE", at.status.phase)
      local c = at.status.conditions[1]
      assert.are.same({ "Ready", "True", "Done", at.metadata.generation },
        { c.type, c.status, c.reason, c.observedGeneration })
      assert.is_truthy(time.parse(c.lastTransitionTime))
      -- the one in the future: Ready False, Pending
      kube.must { "wait", "-n", ns, "--for=condition=Ready=false", "at/later", "--timeout=30s" }
      assert.are.equal("Pending", get("at", "later").status.conditions[1].reason)
      local ok, out = kube.kubectl { "wait", "-n", ns, "--for=condition=Ready", "at/later", "--timeout=1s" }
      assert.is_false(ok, "kubectl wait found a pending At Ready")
      assert.matches("timed out", out)
    end)

    it("keeps an At in the future PENDING until its time", function()
      local at_time = os.time() + 6
      apply(([[
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: later}
spec: {schedule: "%s", command: "echo later"}
]]):format(time.format(at_time)))
      kube.wait_for("later PENDING", 30, function()
        local at = get("at", "later")
        return at and at.status and at.status.phase == "PENDING"
      end)
      assert.is_nil(get("pod", "later-pod"))
      kube.wait_for("later-pod", 30, function() return get("pod", "later-pod") end)
      assert.is_true(os.time() >= at_time, "the Pod came before the schedule")
      kube.wait_for("later DONE", 60, function()
        local at = get("at", "later")
        return at.status and at.status.phase == "DONE"
      end)
    end)

    it("has a bad schedule and a missing command rejected by the API server", function()
      local ok, err = kube.kubectl({ "apply", "-n", ns, "-f", "-" }, [[
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: bad}
spec: {schedule: "2019-04-12T10:12Z", command: "echo"}
]])
      assert.is_false(ok)
      assert.matches("spec.schedule", err)
      ok, err = kube.kubectl({ "apply", "-n", ns, "-f", "-" }, [[
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: bad}
spec: {schedule: "2019-04-12T10:12:00Z"}
]])
      assert.is_false(ok)
      assert.matches("spec.command: Required value", err)
      -- the right shape, but no real time
      for _, when in ipairs { "2026-19-39T29:00:00Z", "2026-02-29T00:00:00Z", "2026-04-31T00:00:00Z" } do
        ok, err = kube.kubectl({ "apply", "-n", ns, "-f", "-" }, ([[
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: bad}
spec: {schedule: "%s", command: "echo"}
]]):format(when))
        assert.is_false(ok, when)
        assert.matches("spec.schedule in body must be of type date%-time", err)
      end
    end)

    it("marks an At whose schedule is no real time FAILED, with one Warning Event, when an older CRD let it in", function()
      -- the CRD as it was before it checked the date itself
      kube.must { "patch", "crd", "ats.cnat.programming-kubernetes.info", "--type=json", "-p",
        '[{"op":"remove","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/schedule/format"}]' }
      finally(function() kube.must { "apply", "-k", "manifests/crds" } end)
      kube.wait_for("the older CRD served", 30, function()
        return kube.kubectl({ "apply", "-n", ns, "-f", "-" }, [[
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: feb30}
spec: {schedule: "2026-02-30T00:00:00Z", command: "echo never"}
]])
      end)
      local at = kube.wait_for("feb30 FAILED", 30, function()
        local a = get("at", "feb30")
        return a and a.status and a.status.phase == "FAILED" and a
      end)
      assert.matches("spec.schedule: \"2026%-02%-30T00:00:00Z\": day 30 is out of range", at.status.message)
      local events = kube.list("events", ns, "--field-selector", "involvedObject.name=feb30,type=Warning")
      assert.are.equal(1, #events)
      assert.are.equal("InvalidSchedule", events[1].reason)
      assert.is_nil(get("pod", "feb30-pod"))
    end)
  end)

  describe("the useless machine", function()
    local function switches(machine)
      return kube.list("switches", ns, "-l", "machine=" .. machine)
    end
    local function positions(machine)
      local m = get("machine", machine)
      return m and m.status and m.status.positions
    end

    it("gives a Machine its switches, flips them back down one at a time, scales and is collected", function()
      apply [[
apiVersion: useless.container.training/v1alpha1
kind: Machine
metadata: {name: m1}
spec: {switches: 3}
]]
      kube.wait_for("positions ddd", 30, function() return positions("m1") == "ddd" end)
      local sws = switches("m1")
      assert.are.equal(3, #sws)
      for _, sw in ipairs(sws) do
        assert.matches("^switch%-", sw.metadata.name)
        assert.are.equal("Machine", sw.metadata.ownerReferences[1].kind)
        assert.is_true(sw.metadata.ownerReferences[1].controller)
      end

      -- two switches up: positions follow, then each goes back down, 5 s apart
      local t_up = os.time()
      for i = 1, 2 do
        kube.must { "patch", "switch", sws[i].metadata.name, "-n", ns, "--type=merge", "-p", '{"spec":{"position":"up"}}' }
      end
      kube.wait_for("positions uud", 30, function() return positions("m1") == "uud" end)
      kube.wait_for("positions ddd again", 40, function() return positions("m1") == "ddd" end)
      assert.is_true(os.time() - t_up >= 9, "two flips of one machine came less than 5 s apart")
      -- the machine's log says when it flipped each
      local flips = {}
      local flip = "(%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d+Z)\tINFO\tcontroller%.machine\tflipping switch down\t{\"name\": \"m1\""
      for ts in run.stderr():gmatch(flip) do
        flips[#flips + 1] = assert(time.parse(ts)) -- whole timestamps: right across midnight too
      end
      assert.are.equal(2, #flips)
      assert.is_true(flips[2] - flips[1] >= 4.9, ("flips %.2f s apart"):format(flips[2] - flips[1]))
      wait_events(ns, "m1", { "SwitchCreated", "SwitchFlipped" })

      -- scale down: the extra switches go
      kube.must { "patch", "machine", "m1", "-n", ns, "--type=merge", "-p", '{"spec":{"switches":1}}' }
      kube.wait_for("one switch", 30, function() return #switches("m1") == 1 and positions("m1") == "d" end)

      -- delete the machine: the garbage collector takes its switches
      kube.must { "delete", "machine", "m1", "-n", ns }
      kube.wait_for("switches collected", 60, function() return #switches("m1") == 0 end)
    end)

    it("refuses a Machine with no switches and a switch in an unknown position", function()
      local ok, err = kube.kubectl({ "apply", "-n", ns, "-f", "-" }, [[
apiVersion: useless.container.training/v1alpha1
kind: Machine
metadata: {name: empty}
spec: {switches: 0}
]])
      assert.is_false(ok)
      assert.matches("spec.switches", err)
      ok, err = kube.kubectl({ "apply", "-n", ns, "-f", "-" }, [[
apiVersion: useless.container.training/v1alpha1
kind: Switch
metadata: {name: sideways}
spec: {position: sideways}
]])
      assert.is_false(ok)
      assert.matches("spec.position: Unsupported value", err)
    end)
  end)

  describe("the secret copier", function()
    -- a source of this run's own (copies carry its name in a label), in the
    -- namespace the operator reads sources from
    local source

    local function copies()
      local out = {}
      for _, s in ipairs(kube.list("secrets", nil, "-l", "secretsync.k8s.ziwon.dev/source=" .. source)) do
        out[s.metadata.namespace] = s
      end
      return out
    end

    it("copies a source secret everywhere but the excluded namespaces, keeps copies in sync, and removes them", function()
      source = "shared-" .. ns
      -- the namespace is the operator's contract; one an earlier run is
      -- still deleting is waited out, and one this run creates it deletes
      local made = kube.secretsync_namespace()
      if made then finally(made) end
      finally(kube.sync_source(source)) -- (its finalizer taken off, if the operator is gone first)
      kube.wait_for("a copy in the spec's namespace and default", 30, function()
        local c = copies()
        return c[ns] and c.default
      end)
      local c = copies()
      assert.is_nil(c["kube-system"])
      assert.is_nil(c["kube-public"])
      assert.is_nil(c["kube-node-lease"])
      assert.is_nil(c.secretsync)
      assert.are.equal("b25l", c[ns].data.password) -- "one"

      -- the source changes: every copy follows
      kube.must { "patch", "secret", source, "-n", "secretsync", "--type=merge", "-p", '{"data":{"password":"dHdv"}}' }
      kube.wait_for("copies at two", 30, function()
        for _, s in pairs(copies()) do if s.data.password ~= "dHdv" then return false end end
        return true
      end)
      wait_events("secretsync", source, { "CopyCreated", "CopyUpdated" })
      -- a copy drifts: it is put back
      kube.must { "patch", "secret", source, "-n", ns, "--type=merge", "-p", '{"data":{"password":"ZHJpZnQ="}}' }
      kube.wait_for("drift reverted", 30, function()
        local s = kube.get("secret", source, ns)
        return s and s.data.password == "dHdv"
      end)
      -- a namespace created later gets its copy
      local later = kube.new_namespace("e2e-ops-later")
      finally(function() kube.delete_namespace(later) end)
      kube.wait_for("a copy in the new namespace", 30, function() return copies()[later] end)

      -- the source goes: so do the copies
      kube.must { "delete", "secret", source, "-n", "secretsync", "--timeout=30s" }
      kube.wait_for("copies removed", 30, function() return next(copies()) == nil end)
      wait_events("secretsync", source, { "CopyRemoved" })
    end)
  end)

  describe("the pod watcher", function()
    it("logs a pod's add, update and delete as namespace/name", function()
      local key = ns .. "/watched"
      kube.must { "run", "watched", "-n", ns, "--image=busybox", "--restart=Never", "--", "true" }
      kube.wait_for("pod added", 30, function()
        return run.stderr():find('pod added\t{"name": "watched", "namespace": "' .. ns .. '", "pod": "' .. key, 1, true)
      end)
      kube.wait_for("pod updated", 30, function() return run.stderr():find("pod updated\t{\"name\": \"watched\"", 1, true) end)
      kube.must { "delete", "pod", "watched", "-n", ns, "--wait=false" }
      kube.wait_for("pod deleted", 30, function()
        return run.stderr():find('pod deleted\t{"name": "watched", "namespace": "' .. ns .. '", "pod": "' .. key, 1, true)
      end)
    end)
  end)
end)
end
