-- Leader election on the local control plane, with two and three luaop
-- processes and short durations (lease 3 s, renew deadline 2 s, retry
-- 0.5 s). Each process runs a controller that stamps one ConfigMap with
-- its own name and a count every 0.2 s; a `kubectl get --watch` records
-- every version the API server stores, so a write is seen where it
-- arrives, whoever sent it.
local kube = require "support.kube"
local luaop = require "support.luaop"
local volume = require "support.volume"
local proc = require "support.proc"
local cut = require "support.cut"
local system = require "system"

local LEASE, RENEW, RETRY = 3, 2, 0.5

local function stamper(ns, me)
  return ([[
local luaop = require "luaop"
local n = 0
return luaop.controller {
  name = "stamper", resource = "v1/ConfigMap", namespace = %q,
  reconcile = function(ctx, req)
    if req.name ~= "target" then return end
    n = n + 1
    local _, err = ctx:patch("ConfigMap", req, { metadata = { annotations = { writer = %q .. "-" .. n } } })
    if err then error(err) end
    return luaop.requeue_after(0.2)
  end,
}
]]):format(ns, me)
end

describe("leader election", function()
  local ns, watch
  local runs = {}

  before_each(function()
    ns = kube.new_namespace("e2e-leader")
    kube.must { "create", "configmap", "target", "-n", ns, "--from-literal=k=v" }
    watch = kube.watch { "get", "configmap", "target", "-n", ns, "-o",
      "jsonpath={.metadata.annotations.writer}{\"\\n\"}" }
    runs = {}
  end)

  after_each(function()
    for _, r in pairs(runs) do
      os.execute("kill -CONT " .. r.run.pid() .. " 2>/dev/null")
      r.run.cleanup()
      r.vol:remove()
    end
    watch.stop()
    kube.delete_namespace(ns)
  end)

  -- Start process `me` (its kubeconfig: opts.kubeconfig or the cluster's;
  -- opts.exit: the status its cleanup expects, 0 by default).
  local function start(me, opts)
    opts = opts or {}
    local vol = volume.new { ["stamper.lua"] = stamper(ns, me) }
    local run = luaop.start({ vol.dir }, { kubeconfig = opts.kubeconfig, exit = opts.exit, flags = {
      "--leader-elect", "--leader-election-id", "stamper", "--leader-election-namespace", ns,
      "--leader-elect-lease-duration", LEASE .. "s", "--leader-elect-renew-deadline", RENEW .. "s",
      "--leader-elect-retry-period", RETRY .. "s", "--health-probe-bind-address", "127.0.0.1:0" } })
    runs[me] = { run = run, vol = vol }
    return run
  end

  local function leads(run) return run.stderr():find("successfully acquired lease", 1, true) ~= nil end
  local function synced(run) return run.stderr():find("caches synced", 1, true) ~= nil end
  local function writes(me)
    local n = 0
    for _, l in ipairs(watch.lines()) do
      if l:match("^" .. me .. "%-%d+$") then n = n + 1 end
    end
    return n
  end
  -- The highest count of `me` stored so far.
  local function last_write(me)
    local top = 0
    for _, l in ipairs(watch.lines()) do
      local n = tonumber(l:match("^" .. me .. "%-(%d+)$"))
      if n and n > top then top = n end
    end
    return top
  end
  local function lease() return kube.get("lease", "stamper", ns) end
  local function holder()
    local l = lease()
    return l and l.spec.holderIdentity
  end
  local function identity(run) return run.stderr():match('"identity": "([^"]+)"') end
  -- Wait until one of the runs leads; returns its name.
  local function leader(names, timeout)
    return kube.wait_for("a leader", timeout or 15, function()
      for _, me in ipairs(names) do
        if runs[me] and leads(runs[me].run) then return me end
      end
    end)
  end

  it("has one leader of two processes; the other waits warm: caches synced, ready, no reconcile", function()
    local a = start("A")
    kube.wait_for("A to lead", 15, function() return leads(a) end)
    local b = start("B")
    kube.wait_for("B's caches", 15, function() return synced(b) end)
    kube.wait_for("A's writes", 10, function() return writes("A") >= 5 end)
    system.sleep(LEASE + RETRY) -- longer than a lease: B still only waits
    assert.is_false(leads(b))
    assert.are.equal(0, writes("B"))
    assert.is_nil(b.stderr():find("Starting workers", 1, true))
    assert.are.equal(identity(a), holder())
    -- a warm standby is ready
    local port = b.stderr():match('"name": "health probe"[^}]*"port": (%d+)')
    local ok, out = proc.sh("curl -s -m 5 http://127.0.0.1:" .. port .. "/readyz")
    assert.is_true(ok, out)
    assert.matches("ok", out)
  end)

  it("hands over within a retry period of SIGTERM, the standby starting at once from its warm caches", function()
    local a = start("A")
    kube.wait_for("A to lead", 15, function() return leads(a) end)
    local b = start("B")
    kube.wait_for("B's caches", 15, function() return synced(b) end)
    local t0 = system.gettime()
    a.signal("TERM")
    kube.wait_for("B to lead", 10, function() return leads(b) end)
    local took = system.gettime() - t0
    assert.are.equal(0, a.stop())
    assert.matches("released the leader lease", a.stderr())
    assert.is_true(took < 2, ("B led %.2f s after SIGTERM"):format(took))
    -- client-go's record: created by A (0 transitions), taken by B (1)
    local l = lease()
    assert.are.equal(1, l.spec.leaseTransitions)
    assert.are.equal(LEASE, l.spec.leaseDurationSeconds)
    assert.matches("%.%d%d%d%d%d%dZ$", l.spec.renewTime)
    -- B's caches are warm: its first write follows at once
    kube.wait_for("B's writes", 5, function() return writes("B") >= 1 end)
    assert.are.equal(identity(b), holder())
  end)

  it("has a standby lead within a lease duration and a retry period of SIGKILL of the leader", function()
    local a = start("A", { exit = 137 })
    kube.wait_for("A to lead", 15, function() return leads(a) end)
    local b = start("B")
    kube.wait_for("B's caches", 15, function() return synced(b) end)
    local t0 = system.gettime()
    os.execute("kill -KILL " .. a.pid())
    kube.wait_for("B to lead", 15, function() return leads(b) end)
    local took = system.gettime() - t0
    assert.is_true(took <= LEASE + RETRY + 0.5, ("B led %.2f s after SIGKILL"):format(took))
    assert.is_true(took >= LEASE - RETRY, ("B led %.2f s after SIGKILL: before the lease expired"):format(took))
    kube.wait_for("B's writes", 5, function() return writes("B") >= 1 end)
  end)

  it("has one leader at any time among three processes, through two failovers", function()
    local names = { "A", "B", "C" }
    for _, me in ipairs(names) do start(me) end
    local seen = {}
    local gone, gone_last -- the leader stopped in the round before, and its last write
    for round = 1, 3 do
      local me = leader(names)
      assert.is_nil(seen[me], me .. " led twice")
      seen[me] = true
      kube.wait_for(me .. "'s writes", 10, function() return writes(me) >= 3 end)
      -- (three writes of the new leader later: nothing more of the old one's)
      if gone then assert.are.equal(gone_last, last_write(gone), gone .. " wrote after it stopped") end
      -- nobody else leads meanwhile, and nobody else wrote
      for _, other in ipairs(names) do
        if other ~= me and not seen[other] then
          assert.is_false(leads(runs[other].run), other .. " leads beside " .. me)
          assert.are.equal(0, writes(other))
        end
      end
      if round < 3 then
        local last = last_write(me)
        runs[me].run.signal("TERM")
        assert.are.equal(0, runs[me].run.stop())
        local after = last_write(me)
        assert.is_true(after >= last)
        runs[me].run.cleanup()
        runs[me].vol:remove()
        runs[me] = nil
        gone, gone_last = me, after
      end
    end
  end)

  it("makes no write from a leader paused longer than its lease once it resumes, and it exits 1", function()
    local a = start("A")
    kube.wait_for("A to lead", 15, function() return leads(a) end)
    local b = start("B")
    kube.wait_for("B's caches", 15, function() return synced(b) end)
    kube.wait_for("A's writes", 10, function() return writes("A") >= 3 end)
    os.execute("kill -STOP " .. a.pid())
    kube.wait_for("B to lead", 15, function() return leads(b) end)
    kube.wait_for("B's writes", 5, function() return writes("B") >= 2 end)
    -- (what A sent before the stop landed before its lease ran out and B led)
    local before = last_write("A")
    system.sleep(LEASE) -- paused longer than a lease in all
    os.execute("kill -CONT " .. a.pid())
    kube.wait_for("A to give up", 10, function() return a.exited() end)
    assert.are.equal(1, a.stop(false))
    assert.matches("leader election lost", a.stderr())
    -- three more writes of B's: anything A sent on resuming has landed
    local n = writes("B")
    kube.wait_for("B's next writes", 5, function() return writes("B") >= n + 3 end)
    assert.are.equal(before, last_write("A"), "A wrote after it resumed; the versions stored, in order:\n"
      .. table.concat(watch.lines(), " "))
    assert.are.equal(identity(b), holder())
  end)

  it("gives the election up and exits 1 once the API server is out of its reach for longer than the renew "
    .. "deadline, and B leads", function()
    -- A reaches the API server through a proxy the spec can cut; B directly.
    -- (The cut drops A's writes too, so that A's fence stops them at the
    -- renew deadline cannot be seen here: spec/unit/fence_spec.lua's stalled
    -- renewals, with the writes still reaching the server, show it.)
    local cutter = cut.start(os.getenv("KUBECONFIG"))
    finally(cutter.stop)
    local a = start("A", { kubeconfig = cutter.kubeconfig })
    kube.wait_for("A to lead", 15, function() return leads(a) end)
    local b = start("B")
    kube.wait_for("B's caches", 15, function() return synced(b) end)
    kube.wait_for("A's writes", 10, function() return writes("A") >= 3 end)
    cutter.cut()
    local cut_at = system.gettime()
    kube.wait_for("B to lead", 15, function() return leads(b) end)
    -- (what A sent before the cut landed before its lease ran out)
    local before = last_write("A")
    -- A notices by itself: lost, it exits 1
    kube.wait_for("A to give up", 10, function() return a.exited() end)
    assert.are.equal(1, a.stop(false))
    assert.matches("leader election lost", a.stderr())
    assert.is_true(system.gettime() - cut_at > RENEW - RETRY, "A gave up before its renew deadline")
    cutter.restore() -- reachable again: nothing of A's may come now
    local n = writes("B")
    kube.wait_for("B's next writes", 5, function() return writes("B") >= n + 3 end)
    assert.are.equal(before, last_write("A"), "A wrote after the API server was cut off")
  end)
end)
