-- The four example operators through the chaos proxy (hack/chaos/main.go:
-- TLS of its own, the admin's credentials upstream) against the local
-- control plane: the same work twice, once with the proxy passing
-- everything and once with a fixed seed's faults (429 and 503 with
-- Retry-After, resets mid-answer and mid-stream, slow answers, 410 and 500
-- in watch streams, truncated and garbled lines, stalls, duplicated and
-- reordered events). Both end in the exact same state; the faulty run
-- makes no more than its fault-free writes plus a stated bound, never
-- dies, peaks at most twice the fault-free run's memory, and shows each
-- kind of watch fault in a log line and a metric.
--
-- Not here: the 20 MiB line (spec/unit/informer_spec.lua, with its memory
-- bound: luaop reads up to 16 MiB of it, which alone is about the
-- fault-free peak) and a stream without its end bookmark (the same spec:
-- here it would cost informer.INITIAL_EVENTS_TIMEOUT, 60 s, each time);
-- bench/chaos.sh soaks with every fault.
local kube = require "support.kube"
local luaop = require "support.luaop"
local proc = require "support.proc"
local chaos_proxy = require "support.chaos"
local json = require("luaop.core").json

local SEED = 28
local FAULTS = "429,503,reset,slow,gone,status,truncate,garble,stall,dup,reorder"

local time = require("luaop").time

-- The chaos proxy (spec/support/chaos.lua) with this spec's faults.
local function start_proxy(rate)
  return chaos_proxy.start { seed = SEED, rate = rate, watch_rate = 0.7, faults = FAULTS }
end

local function utc(offset) return time.format(os.time() + offset) end

-- The value of every sample of family `name` whose labels match `pattern`,
-- summed.
local function sum(text, name, pattern)
  local total = 0
  for labels, v in text:gmatch(name .. "{([^}]*)} ([%d.e+]+)") do
    if not pattern or labels:find(pattern) then total = total + tonumber(v) end
  end
  return total
end

-- Run the operators through kubeconfig on one round of work in a fresh
-- namespace, to the end state; returns what it measured.
local function round(kubeconfig, label, during)
  local ns = kube.new_namespace("e2e-chaos-" .. label)
  finally(function() kube.delete_namespace(ns) end)
  local run = luaop.start({ "operators" }, { kubeconfig = kubeconfig,
    flags = { "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0" } })
  finally(run.cleanup)
  local ports = kube.wait_for("the servers' ports", 30, function()
    local e = run.stderr()
    local m = e:match('Serving metrics server\t{[^}]*"port": (%d+)')
    local p = e:match('"name": "health probe"[^}]*"port": (%d+)')
    return m and p and { m, p }
  end)
  local mport, pport = ports[1], ports[2]
  kube.wait_for("caches synced", 60, function() return run.stderr():find("caches synced", 1, true) end)
  local t0 = os.time()
  local apply = function(yaml) kube.must({ "apply", "-n", ns, "-f", "-" }, yaml) end
  apply [[
apiVersion: useless.container.training/v1alpha1
kind: Machine
metadata: {name: m}
spec: {switches: 3}
]]
  for i = 1, 3 do
    apply(([[
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: at-%d}
spec: {schedule: "%s", command: "echo %d"}
]]):format(i, utc(-60), i))
  end
  local source = "chaos-" .. ns
  finally(kube.sync_source(source))
  local function positions()
    local m = kube.get("machine", "m", ns)
    return m and m.status and m.status.positions
  end
  kube.wait_for("three switches down", 90, function() return positions() == "ddd" end)
  kube.must { "patch", "machine", "m", "-n", ns, "--type=merge", "-p", '{"spec":{"switches":2}}' }
  if during then during() end
  local function converged()
    if positions() ~= "dd" or #kube.list("switches", ns, "-l", "machine=m") ~= 2 then return false end
    for i = 1, 3 do
      local at = kube.get("at", "at-" .. i, ns)
      if not (at and at.status and at.status.phase == "DONE") then return false end
    end
    local copy = kube.get("secret", source, ns)
    return copy ~= nil and copy.data.password == "b25l"
  end
  kube.wait_for(label .. ": the end state", 120, converged)
  local took = os.time() - t0
  -- the exact end state: two switches, three pods (never one twice), one copy
  local pods = kube.list("pods", ns)
  assert.are.equal(3, #pods, label)
  local _, metrics = proc.http("http://127.0.0.1:" .. mport .. "/metrics")
  local ready = proc.http("http://127.0.0.1:" .. pport .. "/readyz")
  local healthy = proc.http("http://127.0.0.1:" .. pport .. "/healthz")
  local status = proc.read("/proc/" .. run.pid() .. "/status") or ""
  local peak = tonumber(status:match("VmHWM:%s*(%d+) kB"))
  local out = { took = took, metrics = metrics, ready = ready, healthy = healthy, peak = peak,
    writes = sum(metrics, "rest_client_requests_total", 'method="[PDU]') + sum(metrics, "rest_client_requests_total",
      'method="POST"'), err = run.stderr() }
  run.stop()
  return out
end

describe("the example operators through the chaos proxy", function()
  setup(function()
    kube.must { "apply", "-k", "manifests/crds" }
    kube.must { "wait", "--for", "condition=Established", "crd", "--all", "--timeout=30s" }
    if not kube.get("namespace", "secretsync") then kube.must { "create", "namespace", "secretsync" } end
  end)

  it("end in the exact state of a fault-free run, within a bound of its writes and twice its peak memory, "
    .. "every watch fault logged and counted", function()
    local proxy = start_proxy(0.5)
    finally(proxy.stop)
    proxy.control("pause")
    local calm = round(proxy.kubeconfig, "calm")
    local before = proxy.stats()
    proxy.control("resume")
    local chaos = round(proxy.kubeconfig, "faulty", function()
      -- the faults stop once the work is all asked for: it must converge
      local ok, err = pcall(kube.wait_for, "faults injected", 90, function()
        local n = 0
        for k, v in pairs(proxy.stats()) do if k:match("^fault ") then n = n + v end end
        return n >= 20
      end)
      assert(ok, tostring(err) .. ": " .. json.encode(proxy.stats()))
      proxy.control("pause")
    end)
    local faults = {}
    for k, v in pairs(proxy.stats()) do
      local kind = k:match("^fault (.*)")
      if kind then faults[kind] = v - (before[k] or 0) end
    end
    -- never died, and says it is ready and healthy at the end
    assert.are.equal(200, chaos.ready, chaos.err:sub(-3000))
    assert.are.equal(200, chaos.healthy)
    -- writes: the fault-free run's, plus at most 2 for each fault (a
    -- write whose answer was cut off is made again, a Conflict read again)
    local nfaults = 0
    for _, n in pairs(faults) do nfaults = nfaults + n end
    assert.is_true(chaos.writes <= calm.writes + 2 * nfaults,
      ("%d writes under %d faults, %d without"):format(chaos.writes, nfaults, calm.writes))
    assert.is_true(chaos.peak <= 2 * calm.peak, ("VmHWM %d kB under faults, %d kB without"):format(chaos.peak, calm.peak))
    -- each kind of watch fault that reached luaop: a log line and a metric
    local reasons = {
      gone = { "Expired", "INFO\tinformer\t[^\n]*too old resource version: 1 %(2%)" },
      status = { "Status", "\tinformer\t[^\n]*InternalError %(500%): chaos: an internal error" },
      garble = { "MalformedEvent", "ERROR\tinformer\tlist/watch failed, listing again[^\n]*malformed watch event" },
    }
    for kind, r in pairs(reasons) do
      if (faults[kind] or 0) > 0 then
        -- (failing, it says which requests the proxy faulted, and what
        -- luaop logged and counted)
        local counted = {}
        for l in chaos.metrics:gmatch("luaop_watch_failures_total{[^\n]*") do counted[#counted + 1] = l end
        local seen = ("\nthe proxy's faults:\n%s\nluaop's log:\n%s\nits metrics:\n%s"):format(
          proc.read(proxy.dir .. "/log") or "", chaos.err:sub(-6000), table.concat(counted, "\n"))
        assert.is_true(sum(chaos.metrics, "luaop_watch_failures_total", 'reason="' .. r[1] .. '"') > 0,
          ("%d %s faults, no luaop_watch_failures_total{reason=%q}"):format(faults[kind], kind, r[1]) .. seen)
        assert.is_truthy(chaos.err:find(r[2]), ("%s faults, no log line matching %q"):format(kind, r[2]) .. seen)
      end
    end
    if (faults["429"] or 0) + (faults["503"] or 0) > 0 then
      assert.is_true(sum(chaos.metrics, "luaop_rest_client_retries_total") > 0)
    end
    print(("# chaos: %d faults %s; writes %d (fault-free %d); VmHWM %d kB (fault-free %d); converged in %d s (%d)")
      :format(nfaults, json.encode(faults), chaos.writes, calm.writes, chaos.peak, calm.peak, chaos.took, calm.took))
  end)
end)
