-- Sharded controllers on the local control plane (docs/sharding.md):
-- rings of luaop processes (lease 6 s, renew deadline 4 s, retry 0.5 s)
-- whose controller stamps ConfigMaps in ten namespaces once a second with
-- a count. Writes are seen where they arrive: the API server's audit log
-- records every write in those namespaces (hack/kwok/audit-policy.yaml)
-- with the User-Agent that names the process (`luaop/VERSION
-- (identity)`) and when the server received and answered it.
local kube = require "support.kube"
local luaop = require "support.luaop"
local volume = require "support.volume"
local cut = require "support.cut"
local proc = require "support.proc"
local chaos = require "support.chaos"
local json = require("luaop.core").json
local system = require "system"

local LEASE, RENEW, RETRY = 6, 4, 0.5 -- (a renew deadline with room for a loaded machine)
local NAMESPACES = 10

local function ns_of(i) return "luaop-shard-" .. i end
local RING_NS = ns_of(0)

local function stamper(case, by)
  return ([[
local luaop = require "luaop"
local n = {}
return luaop.controller {
  name = "shard-stamper", resource = "v1/ConfigMap", label_selector = "luaop-e2e-shard=%s", shard_by = %q,
  -- (its own stamps are no events: a write a second per key, by the requeue)
  filter = function(old, new) return old == nil or new == nil end,
  -- a watched kind sharded with the keys (a Secret names the key of its
  -- namespace), and one whole (every namespace's default ServiceAccount)
  watches = {
    { "v1/Secret", sharded = true, label_selector = "luaop-e2e-shard=%s",
      map = function(s) return { { namespace = s.metadata.namespace, name = "%s-1" } } end },
    { "v1/ServiceAccount", field_selector = "metadata.name=default", map = function() return {} end },
  },
  reconcile = function(ctx, req)
    local k = req.namespace .. "/" .. req.name
    n[k] = (n[k] or 0) + 1
    local _, err = ctx:patch("ConfigMap", req, { metadata = { annotations = { count = tostring(n[k]) } } })
    if err and not luaop.is_error(err, "NotFound") then error(err) end
    return luaop.requeue_after(1)
  end,
}
]]):format(case, by, case, case)
end

-- Both kinds stamped, each its own controller.
local function stamper2(case)
  return ([[
local luaop = require "luaop"
local function stamp(kind)
  local n = {}
  return luaop.controller {
    name = "shard-stamper-" .. kind:lower(), resource = "v1/" .. kind, label_selector = "luaop-e2e-shard=%s",
    filter = function(old, new) return old == nil or new == nil end,
    reconcile = function(ctx, req)
      local k = req.namespace .. "/" .. req.name
      n[k] = (n[k] or 0) + 1
      local _, err = ctx:patch(kind, req, { metadata = { annotations = { count = tostring(n[k]) } } })
      if err and not luaop.is_error(err, "NotFound") then error(err) end
      return luaop.requeue_after(1)
    end,
  }
end
return { stamp("ConfigMap"), stamp("Secret") }
]]):format(case)
end

-- Seconds since midnight of an audit timestamp ("...T10:40:01.123456Z").
local function seconds(ts)
  local h, m, s = tostring(ts):match("T(%d%d):(%d%d):([%d.]+)Z$")
  return tonumber(h) * 3600 + tonumber(m) * 60 + tonumber(s)
end

local function audit_log()
  return assert(os.getenv("KUBECONFIG")):gsub("[^/]*$", "") .. "kwok/clusters/luaop/logs/audit.log"
end

-- The audit log's complete lines holding `needle` and ResponseComplete,
-- decoded. The API server may be writing its last line as it is read: a
-- line without its newline is not yet one (any complete line must decode).
local function audit_events(needle)
  local out = {}
  local f = io.open(audit_log())
  if not f then return out end
  local text = f:read("a")
  f:close()
  for line in text:gmatch("([^\n]*)\n") do
    if line:find(needle, 1, true) and line:find('"ResponseComplete"', 1, true) then
      out[#out + 1] = assert(json.decode(line))
    end
  end
  return out
end

-- The writes the audit log holds of case's ConfigMaps (by name; another
-- resource if given), in order of arrival: {key, identity, received,
-- completed (seconds), code}.
local function writes(case, resource)
  local out = {}
  for _, e in ipairs(audit_events(case)) do
    local ref = e.objectRef or {}
    local id = tostring(e.userAgent):match("^luaop/[^ ]+ %((.*)%)$")
    if id and e.verb == "patch" and ref.resource == (resource or "configmaps")
      and tostring(ref.name):find(case, 1, true) then
      out[#out + 1] = { key = ref.namespace .. "/" .. ref.name, id = id, received = seconds(e.requestReceivedTimestamp),
        completed = seconds(e.stageTimestamp), code = e.responseStatus and e.responseStatus.code }
    end
  end
  table.sort(out, function(a, b) return a.received < b.received end)
  return out
end

local function now_seconds()
  local t = system.gettime()
  return t % 86400
end

-- For each key, whether writes of two processes ever overlapped: the one
-- before a change of writer answered before the next was received.
local function overlaps(ws)
  local last, bad = {}, {}
  for _, w in ipairs(ws) do
    local l = last[w.key]
    if l and l.id ~= w.id and l.completed > w.received then
      bad[#bad + 1] = ("%s: %s answered at %.6f, %s received at %.6f"):format(w.key, l.id, l.completed, w.id, w.received)
    end
    last[w.key] = w
  end
  return bad
end

-- key -> the set of identities that wrote it at or after `since`
local function writers(ws, since)
  local out = {}
  for _, w in ipairs(ws) do
    if w.received >= since then
      out[w.key] = out[w.key] or {}
      out[w.key][w.id] = true
    end
  end
  return out
end

local function count(set)
  local n = 0
  for _ in pairs(set) do n = n + 1 end
  return n
end

describe("sharded controllers", function()
  local runs, case, keys

  setup(function()
    for i = 0, NAMESPACES - 1 do
      kube.kubectl { "create", "namespace", ns_of(i) } -- (there already from an earlier run: kept)
    end
  end)

  before_each(function()
    case = ("c%d%04d"):format(os.time() % 100000, math.random(0, 9999))
    runs, keys = {}, {}
    for i = 0, NAMESPACES - 1 do
      for j = 1, 2 do
        local name = ("%s-%d"):format(case, j)
        kube.must { "create", "configmap", name, "-n", ns_of(i), "--from-literal=k=v" }
        kube.must { "label", "configmap", name, "-n", ns_of(i), "luaop-e2e-shard=" .. case }
        keys[#keys + 1] = ns_of(i) .. "/" .. name
      end
    end
  end)

  after_each(function()
    -- every replica stopped, even when one's stop raises (its exit status):
    -- the first error raised after all are gone
    local first
    for _, r in ipairs(runs) do
      os.execute("kill -CONT " .. r.run.pid() .. " 2>/dev/null")
      local ok, err = pcall(r.run.cleanup)
      if not ok and not first then first = err end
      r.vol:remove()
    end
    for i = 0, NAMESPACES - 1 do
      kube.kubectl { "delete", "configmap,secret", "-n", ns_of(i), "-l", "luaop-e2e-shard=" .. case, "--wait=false" }
    end
    kube.kubectl { "delete", "lease", "-n", RING_NS, "-l", "luaop.dev/shard-ring=" .. case, "--wait=false" }
    if first then error(first, 0) end
  end)

  -- A replica of case's ring; its identity once it logged it.
  local function start(by, opts)
    opts = opts or {}
    local vol = volume.new { ["stamper.lua"] = opts.source or stamper(case, by) }
    local mport = proc.free_port()
    local run = luaop.start({ vol.dir }, { exit = opts.exit, kubeconfig = opts.kubeconfig, flags = {
      "--shard-ring", case, "--shard-namespace", RING_NS,
      "--leader-elect-lease-duration", LEASE .. "s", "--leader-elect-renew-deadline", RENEW .. "s",
      "--leader-elect-retry-period", RETRY .. "s", "--metrics-bind-address", "127.0.0.1:" .. mport } })
    local r = { run = run, vol = vol, mport = mport }
    runs[#runs + 1] = r
    r.id = kube.wait_for("the replica's identity", 20, function()
      return run.stderr():match('"identity": "([^"]+)"')
    end)
    return r
  end

  -- Every key written after `since` by exactly one process, each of the
  -- n live ones' Leases listing ranges that together cover the space
  -- once; returns key -> its writer.
  local function converged(n, since)
    return kube.wait_for(n .. " replicas writing every key, one each", 60, function()
      local leases = kube.list("leases", RING_NS, "-l", "luaop.dev/shard-ring=" .. case)
      local live = 0
      for _, l in ipairs(leases) do
        if l.spec.holderIdentity ~= "" then
          for _, r in ipairs(runs) do
            if r.id == l.spec.holderIdentity and not r.gone then live = live + 1 end
          end
        end
      end
      if live ~= n then return false end
      local by = writers(writes(case), since)
      local owner = {}
      for _, k in ipairs(keys) do
        if not by[k] or count(by[k]) ~= 1 then return false end
        owner[k] = next(by[k])
      end
      return owner
    end)
  end

  -- A replica that writes some keys (owner: key -> writer), and its keys.
  local function a_writer(owner, r)
    if not r then
      for _, x in ipairs(runs) do
        for _, id in pairs(owner) do if id == x.id then r = x end end
      end
    end
    local keys_of = {}
    for k, id in pairs(owner) do if id == r.id then keys_of[#keys_of + 1] = k end end
    return r, keys_of
  end

  -- Wait until another replica than gone has written each of its keys at
  -- or after since (seconds since midnight); how long after since the
  -- last of them was taken over. A write of gone's among them raises.
  local function taken_over(gone, keys_of, since, timeout)
    return kube.wait_for("its keys written by the others", timeout, function()
      local ws, last = writes(case), 0
      for _, k in ipairs(keys_of) do
        local first
        for _, w in ipairs(ws) do
          if w.key == k and w.received >= since then
            if w.id == gone.id then error(k .. " written by the replica gone after " .. since) end
            first = first or w.received
          end
        end
        if not first then return false end
        last = math.max(last, first)
      end
      return last - since
    end)
  end

  -- SIGKILL a replica that writes keys (owner: key -> writer): the others
  -- write each of its keys within the lease from the last renewal seen, a
  -- retry period, the requeue's second and the claim's two reads, and no
  -- key ever has two writers at once.
  local function kill_one(owner)
    local victim, mine = a_writer(owner)
    victim.run.signal("KILL")
    victim.gone = true
    local took = taken_over(victim, mine, now_seconds(), 30)
    assert.is_true(took <= LEASE + RETRY + 1 + 2.5, ("taken over after %.1f s"):format(took))
    assert.are.same({}, overlaps(writes(case)))
  end

  it("reconciles every object in exactly one of three replicas, by namespace, and says how the API server "
    .. "filters", function()
    for i = 0, NAMESPACES - 1 do
      kube.must { "create", "secret", "generic", case .. "-s", "-n", ns_of(i), "--from-literal=k=v" }
      kube.must { "label", "secret", case .. "-s", "-n", ns_of(i), "luaop-e2e-shard=" .. case }
    end
    for _ = 1, 3 do start("namespace") end
    -- settled: from a moment on, each key has one writer
    local owner = converged(3, now_seconds() + LEASE + 2 * RETRY)
    -- a namespace's keys stay together
    for i = 0, NAMESPACES - 1 do
      assert.are.equal(owner[ns_of(i) .. "/" .. case .. "-1"], owner[ns_of(i) .. "/" .. case .. "-2"])
    end
    assert.are.same({}, overlaps(writes(case)))
    -- each informer says whether the server applies the shardSelector
    local ok, probe = kube.kubectl { "get", "--raw", "/api/v1/configmaps?limit=1&shardSelector="
      .. "shardRange%28object.metadata.namespace%2C%20%270x0000000000000000%27%2C%20%270x8000000000000000%27%29" }
    local server = ok and json.decode(probe).metadata.shardInfo ~= nil
    for _, r in ipairs(runs) do
      assert.matches(server and "the API server shards this list and watch" or "the API server does not shard this list",
        r.run.stderr(), 1, true)
    end
    -- the watched kind marked sharded: each Secret in one replica's cache;
    -- the other whole in each
    kube.wait_for("the watched kinds' caches", 30, function()
      local secrets, accounts = 0, {}
      for _, r in ipairs(runs) do
        local _, metrics = proc.http("http://127.0.0.1:" .. r.mport .. "/metrics")
        secrets = secrets + tonumber(metrics:match('luaop_cache_objects{resource="v1/Secret"[^}]*} (%d+)') or 0)
        accounts[#accounts + 1] = tonumber(metrics:match('luaop_cache_objects{resource="v1/ServiceAccount"[^}]*} (%d+)')
          or 0)
      end
      return secrets == NAMESPACES and accounts[1] >= NAMESPACES and accounts[1] == accounts[2]
        and accounts[2] == accounts[3]
    end)
  end)

  it("runs the four example operators in three replicas, each object written for by one of them", function()
    kube.must { "apply", "-k", "manifests/crds" }
    kube.must { "wait", "--for", "condition=Established", "crd", "--all", "--timeout=30s" }
    local made = kube.secretsync_namespace()
    if made then finally(made) end
    local since = now_seconds()
    for _ = 1, 3 do
      local vol = volume.new {}
      local run = luaop.start({ "operators" }, { flags = { "--shard-ring", case, "--shard-namespace", RING_NS,
        "--leader-elect-lease-duration", LEASE .. "s", "--leader-elect-renew-deadline", RENEW .. "s",
        "--leader-elect-retry-period", RETRY .. "s" } })
      local r = { run = run, vol = vol }
      runs[#runs + 1] = r
      r.id = kube.wait_for("the replica's identity", 20, function()
        return run.stderr():match('"identity": "([^"]+)"')
      end)
    end
    kube.wait_for("three replicas holding their parts", 30, function()
      local n = 0
      for _, r in ipairs(runs) do
        if r.run.stderr():find("acquired ranges", 1, true) then n = n + 1 end
      end
      return n == 3
    end)
    -- an At due, a Machine, in every namespace; a source Secret
    for i = 0, NAMESPACES - 1 do
      kube.must({ "apply", "-n", ns_of(i), "-f", "-" }, ([[
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: %s-at, labels: {luaop-e2e-shard: %s}}
spec: {schedule: "%s", command: "echo sharded"}
---
apiVersion: useless.container.training/v1alpha1
kind: Machine
metadata: {name: %s-m, labels: {luaop-e2e-shard: %s}}
spec: {switches: 2}
]]):format(case, case, os.date("!%Y-%m-%dT%H:%M:%SZ", os.time() - 60), case, case))
    end
    local source = case .. "-source"
    finally(kube.sync_source(source))
    for i = 0, NAMESPACES - 1 do
      kube.wait_for("At DONE, Machine dd and the copy in " .. ns_of(i), 90, function()
        local at = kube.get("at", case .. "-at", ns_of(i))
        local m = kube.get("machine", case .. "-m", ns_of(i))
        return at and at.status and at.status.phase == "DONE" and m and m.status and m.status.positions == "dd"
          and kube.get("secret", source, ns_of(i))
      end)
    end
    -- every object the replicas wrote in those namespaces, each by one
    local by, n = {}, 0
    for _, e in ipairs(audit_events("luaop/")) do
      local ref = e.objectRef or {}
      local id = tostring(e.userAgent):match("^luaop/[^ ]+ %((.*)%)$")
      if id and seconds(e.requestReceivedTimestamp) >= since
        and tostring(ref.namespace):find("^luaop%-shard%-") then
        -- (a create by generateName, a Switch's, has no name yet: by
        -- namespace, whose keys are all one replica's)
        local k = ("%s %s/%s"):format(ref.resource, ref.namespace, ref.name or "(generated)")
        by[k] = by[k] or {}
        by[k][id] = true
        n = n + 1
      end
    end
    assert.is_true(n > 0, "no write of the operators in the audit log")
    local kinds, writers_seen = {}, {}
    for k, ids in pairs(by) do
      assert.are.equal(1, count(ids), k .. " written by more than one replica")
      kinds[k:match("^%S+")] = true
      writers_seen[next(ids)] = true
    end
    -- (ten namespaces of about fifteen, none of three replicas holding more
    -- than 1.05 times its share: two at least wrote)
    assert.is_true(count(writers_seen) >= 2, "one replica did all the work")
    for _, r in ipairs { "ats", "pods", "machines", "switches", "secrets" } do
      assert.is_true(kinds[r], "no write of " .. r)
    end
    for i = 0, NAMESPACES - 1 do
      kube.kubectl { "delete", "at,machine", "-n", ns_of(i), "-l", "luaop-e2e-shard=" .. case, "--wait=false" }
    end
  end)

  it("filters a kind the API server does not shard by itself, beside one it does, each object reconciled by "
    .. "one replica", function()
    -- the chaos proxy drops shardSelector for ConfigMaps only: a server
    -- that shards Secrets and not ConfigMaps
    local proxy = chaos.start { strip_shard_selector = "configmaps" }
    finally(proxy.stop)
    local secrets = {}
    for i = 0, NAMESPACES - 1 do
      local name = case .. "-s"
      kube.must { "create", "secret", "generic", name, "-n", ns_of(i), "--from-literal=k=v" }
      kube.must { "label", "secret", name, "-n", ns_of(i), "luaop-e2e-shard=" .. case }
      secrets[#secrets + 1] = ns_of(i) .. "/" .. name
    end
    for _ = 1, 2 do start("namespace", { kubeconfig = proxy.kubeconfig, source = stamper2(case), exit = false }) end
    local since = now_seconds() + LEASE + 2 * RETRY
    converged(2, since)
    kube.wait_for("every Secret written by one replica", 30, function()
      local by = writers(writes(case, "secrets"), since)
      for _, k in ipairs(secrets) do
        if not by[k] or count(by[k]) ~= 1 then return false end
      end
      return true
    end)
    assert.are.same({}, overlaps(writes(case)))
    assert.are.same({}, overlaps(writes(case, "secrets")))
    local ok, probe = kube.kubectl { "get", "--raw", "/api/v1/secrets?limit=1&shardSelector="
      .. "shardRange%28object.metadata.namespace%2C%20%270x0000000000000000%27%2C%20%270x8000000000000000%27%29" }
    local server = ok and json.decode(probe).metadata.shardInfo ~= nil
    for _, r in ipairs(runs) do
      local log = r.run.stderr()
      -- the ConfigMaps of the other replica's namespaces left out before
      -- they were decoded, and counted; no Secret (the server filtered)
      local _, metrics = proc.http("http://127.0.0.1:" .. r.mport .. "/metrics")
      assert.is_true(tonumber(metrics:match('luaop_shard_objects_filtered_total{resource="v1/ConfigMap"} (%d+)') or 0) > 0,
        metrics)
      if server then assert.is_nil(metrics:match('luaop_shard_objects_filtered_total{resource="v1/Secret"}')) end
      assert.matches('the API server does not shard this list[^\n]*"kind": "v1/ConfigMap"', log)
      assert.matches((server and "the API server shards this list and watch" or "the API server does not shard this list")
        .. '[^\n]*"kind": "v1/Secret"', log)
    end
    assert.is_true((proxy.stats()["fault strip-shard-selector"] or 0) > 0)
    for _, r in ipairs(runs) do r.run.stop(0) end -- (before the proxy goes)
  end)

  it("hands namespaces over on a join and on a kill when luaop filters (a server that does not shard), without "
    .. "two writers of one key at any time", function()
    local proxy = chaos.start { strip_shard_selector = "*" }
    finally(proxy.stop)
    local via = { kubeconfig = proxy.kubeconfig, exit = false }
    start("namespace", via)
    start("namespace", via)
    converged(2, now_seconds() + LEASE)
    -- a third joins: the namespaces it gains were in its cache, filtered
    -- by luaop, before it took them
    local t = now_seconds()
    local new = start("namespace", via)
    local owner = converged(3, t + LEASE + 4 * RETRY)
    -- a handover happened: the newcomer took ranges the others released
    assert.matches("acquired ranges", new.run.stderr(), 1, true)
    assert.is_truthy(runs[1].run.stderr():find("released ranges", 1, true)
      or runs[2].run.stderr():find("released ranges", 1, true))
    -- one with keys is killed: the others take them over
    kill_one(owner)
    for _, r in ipairs(runs) do
      assert.matches('the API server does not shard this list[^\n]*"kind": "v1/ConfigMap"', r.run.stderr())
    end
    assert.is_true((proxy.stats()["fault strip-shard-selector"] or 0) > 0)
    for _, r in ipairs(runs) do if not r.gone then r.run.stop(0) end end -- (before the proxy goes)
  end)

  it("hands keys to a replica that joins without two writers of one key at any time", function()
    start("uid")
    start("uid")
    local before = converged(2, now_seconds() + LEASE)
    local t = now_seconds()
    start("uid")
    local after = converged(3, t + LEASE + 4 * RETRY)
    local moved = 0
    for _, k in ipairs(keys) do
      if before[k] ~= after[k] then
        moved = moved + 1
        assert.are.equal(runs[3].id, after[k], k .. " moved, but not to the new replica")
      end
    end
    -- about a third of 20: at least one (none: 20 keys all stayed, 1 in 3^-20)
    assert.is_true(moved >= 1 and moved <= 16, ("%d keys moved"):format(moved))
    assert.are.same({}, overlaps(writes(case)))
    for _, r in ipairs { runs[1], runs[2] } do assert.matches("released ranges", r.run.stderr(), 1, true) end
    assert.matches("acquired ranges", runs[3].run.stderr(), 1, true)
  end)

  it("takes a killed replica's keys over within the lease duration and a retry period", function()
    for _ = 1, 3 do start("uid", { exit = false }) end
    kill_one(converged(3, now_seconds() + LEASE))
  end)

  it("has a replica cut off from the API server give its membership up at the renew deadline and exit 1, its "
    .. "keys taken over by the others", function()
    local cutter = cut.start(os.getenv("KUBECONFIG"))
    finally(cutter.stop)
    start("uid", { exit = false, kubeconfig = cutter.kubeconfig })
    start("uid")
    start("uid")
    local owner = converged(3, now_seconds() + LEASE)
    local victim, mine = a_writer(owner, runs[1])
    cutter.cut()
    victim.gone = true
    local cut_at, t = system.gettime(), now_seconds()
    kube.wait_for("the cut replica to exit", 15, function() return victim.run.exited() end)
    assert.are.equal(1, victim.run.stop(1))
    assert.matches("shard ring membership lost", victim.run.stderr(), 1, true)
    assert.is_true(system.gettime() - cut_at > RENEW - RETRY, "it gave up before its renew deadline")
    taken_over(victim, mine, t, 20)
    cutter.restore()
    assert.are.same({}, overlaps(writes(case)))
  end)

  it("lets a replica paused past its lease write nothing for the keys it lost once it resumes", function()
    for _ = 1, 3 do start("uid", { exit = false }) end
    local owner = converged(3, now_seconds() + LEASE)
    local victim, mine = a_writer(owner)
    victim.run.signal("STOP")
    victim.gone = true
    taken_over(victim, mine, now_seconds(), 30)
    local resumed = now_seconds()
    victim.run.signal("CONT")
    -- it finds its membership lost (the renew deadline long past) and exits 1
    kube.wait_for("the paused replica's exit", 20, function() return victim.run.exited() end)
    assert.are.equal(1, victim.run.stop(1))
    assert.matches("shard ring membership lost", victim.run.stderr(), 1, true)
    for _, w in ipairs(writes(case)) do
      if w.id == victim.id then
        assert.is_true(w.received < resumed, ("%s written by the paused replica after it resumed"):format(w.key))
      end
    end
    assert.are.same({}, overlaps(writes(case)))
  end)
end)
