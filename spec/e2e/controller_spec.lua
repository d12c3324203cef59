-- A Lua controller on the local control plane: it reconciles what it owns,
-- brings back an owned object that was deleted, retries a failing reconcile
-- with backoff and logs its traceback, and honours requeue_after.
local kube = require "support.kube"
local luaop = require "support.luaop"
local proc = require "support.proc"
local system = require "system"

describe("a Lua controller", function()
  local ns, run

  setup(function()
    ns = kube.new_namespace("e2e-controller")
    -- Parents are ConfigMaps labelled role=parent; each gets a child ConfigMap
    -- <name>-child owned by it. A parent with data.fail = "once" raises on its
    -- first reconcile. A parent with data.every = "1" is requeued every second.
    run = luaop.start(([[
      local luaop = require "luaop"
      local ns = %q
      local attempts = {}
      return luaop.controller {
        name = "children",
        resource = "v1/ConfigMap",
        namespace = ns,
        label_selector = "role=parent",
        owns = { "v1/ConfigMap" },
        -- a Secret names its parent in a label; one labelled spin=yes loops
        watches = { { "v1/Secret", namespace = ns, map = function(secret, ctx)
          local labels = secret.metadata.labels or {}
          if labels.spin then while true do end end
          ctx.log:info("mapped", { secret = secret.metadata.name })
          return { { namespace = ns, name = labels.parent } }
        end } },
        concurrency = 2,
        instructions = 20000000,
        memory = "16Mi",
        reconcile = function(ctx, req)
          -- each reconcile says it began and how it ended (a spec that
          -- fails shows which keys ran, and whether one found no object)
          ctx.log:info("reconcile entered")
          local parent = ctx:get("ConfigMap", req)
          if not parent then
            ctx.log:info("reconcile returned: no such object in the cache")
            return
          end
          if parent.data and parent.data.loop then while true do end end
          if parent.data and parent.data.hog then
            local t = {}
            for i = 1, 1e9 do t[i] = ("x"):rep(100) .. i end
          end
          attempts[req.name] = (attempts[req.name] or 0) + 1
          if parent.data and parent.data.fail == "once" and attempts[req.name] == 1 then
            error("first attempt fails on purpose")
          end
          ctx.log:info("reconciling", { attempt = attempts[req.name] })
          local child = luaop.client():get("ConfigMap", req.name .. "-child", ns)
          if not child then
            local _, err = ctx:create {
              apiVersion = "v1", kind = "ConfigMap",
              metadata = { name = req.name .. "-child", namespace = ns,
                ownerReferences = { { apiVersion = "v1", kind = "ConfigMap", name = parent.metadata.name,
                                      uid = parent.metadata.uid, controller = true } } },
              data = { attempts = tostring(attempts[req.name]) },
            }
            if err and err.reason ~= "AlreadyExists" then error(err) end
          end
          if parent.data and parent.data.every then
            -- (logged, not written: a write's watch event would queue it too)
            ctx.log:info("tick", { n = attempts[req.name] })
            return luaop.requeue_after(tonumber(parent.data.every))
          end
        end,
      }
    ]]):format(ns))
  end)

  teardown(function()
    if run then
      run.stop()
      run.cleanup()
    end
    if ns then kube.delete_namespace(ns) end
  end)

  -- The times of the "tick" lines of parent `name`, in order.
  local function ticks_of(name)
    local t = {}
    for line in run.stderr():gmatch("[^\n]+") do
      if line:find("\ttick\t", 1, true) and line:find('"name": "' .. name .. '"', 1, true) then
        t[#t + 1] = assert(require("luaop").time.parse(line:match("^(%S+)")))
      end
    end
    return t
  end

  local function child(name)
    return kube.get("configmap", name .. "-child", ns)
  end

  it("reconciles a new parent into an owned child", function()
    kube.must { "create", "configmap", "p1", "-n", ns, "--from-literal=k=v" }
    kube.must { "label", "configmap", "p1", "-n", ns, "role=parent" }
    local c = kube.wait_for("p1-child", 30, function() return child("p1") end)
    assert.are.equal("p1", c.metadata.ownerReferences[1].name)
    assert.is_true(c.metadata.ownerReferences[1].controller)
  end)

  it("brings back an owned child that was deleted", function()
    local before = kube.wait_for("p1-child", 30, function() return child("p1") end)
    kube.must { "delete", "configmap", "p1-child", "-n", ns }
    local after = kube.wait_for("a new p1-child", 30, function()
      local c = child("p1")
      return c and c.metadata.uid ~= before.metadata.uid and c
    end)
    assert.are.equal("p1", after.metadata.ownerReferences[1].name)
  end)

  it("retries a reconcile that raised, and logs the traceback", function()
    kube.must { "create", "configmap", "p2", "-n", ns, "--from-literal=fail=once" }
    kube.must { "label", "configmap", "p2", "-n", ns, "role=parent" }
    local c = kube.wait_for("p2-child", 30, function() return child("p2") end)
    assert.are.equal("2", c.data.attempts)
    local err = run.stderr()
    assert.matches("Reconciler error", err)
    assert.matches("first attempt fails on purpose", err)
    assert.matches("stack traceback", err)
  end)

  for _, case in ipairs {
    { what = "a runaway reconcile at its instruction budget", name = "runaway", data = "loop=yes",
      error = "instruction budget of 20000000 exceeded", next = "p4" },
    { what = "a reconcile that grows past its memory budget", name = "hog", data = "hog=yes",
      error = "memory budget of 16777216 bytes exceeded", next = "p5" },
  } do
    it("stops " .. case.what .. " and goes on with the others", function()
      kube.must { "create", "configmap", case.name, "-n", ns, "--from-literal=" .. case.data }
      kube.must { "label", "configmap", case.name, "-n", ns, "role=parent" }
      kube.wait_for("the budget error", 30, function() return run.stderr():find(case.error, 1, true) end)
      kube.must { "create", "configmap", case.next, "-n", ns, "--from-literal=k=v" }
      kube.must { "label", "configmap", case.next, "-n", ns, "role=parent" }
      local ok, err = pcall(kube.wait_for, case.next .. "-child", 30, function() return child(case.next) end)
      assert(ok, tostring(err) .. "\nluaop's last lines:\n" .. proc.tail(run.stderr(), 60))
    end)
  end

  it("gives a reconcile that declares no budget 10^8 instructions and 64 MiB", function()
    local run2 = luaop.start(([[
      local luaop = require "luaop"
      return luaop.controller {
        name = "unbudgeted", resource = "v1/ConfigMap", namespace = %q, label_selector = "unbudgeted",
        reconcile = function(ctx, req)
          local cm = ctx:get("ConfigMap", req)
          if cm.data.loop then while true do end end
          local t = {}
          for i = 1, math.huge do t[i] = ("x"):rep(1024) .. i end
        end,
      }
    ]]):format(ns))
    finally(run2.cleanup)
    for _, name in ipairs { "spin", "grow" } do
      kube.must { "create", "configmap", "unbudgeted-" .. name, "-n", ns,
        "--from-literal=" .. (name == "spin" and "loop=yes" or "k=v") }
      kube.must { "label", "configmap", "unbudgeted-" .. name, "-n", ns, "unbudgeted=yes" }
    end
    kube.wait_for("both budget errors", 60, function()
      local err = run2.stderr()
      return err:find("instruction budget of 100000000 exceeded", 1, true)
        and err:find("memory budget of 67108864 bytes exceeded", 1, true)
    end)
    assert.are.equal(0, run2.stop(0))
  end)

  it("stops a runaway watch map function at the instruction budget, and goes on", function()
    kube.must { "create", "secret", "generic", "spin", "-n", ns, "--from-literal=k=v" }
    kube.must { "label", "secret", "spin", "-n", ns, "spin=yes" }
    kube.wait_for("the map's budget error", 30, function()
      -- where the map function was when it ran out: file and line
      return run.stderr():find("watch map of v1/Secret: [^\n]*%.lua:%d+: instruction budget of 20000000 exceeded")
    end)
    kube.must { "create", "secret", "generic", "after", "-n", ns, "--from-literal=k=v" }
    kube.wait_for("the next Secret mapped", 30, function() return run.stderr():match("mapped[^\n]*after") end)
  end)

  it("requeues after the time reconcile asks for", function()
    kube.must { "create", "configmap", "p3", "-n", ns, "--from-literal=every=1" }
    kube.must { "label", "configmap", "p3", "-n", ns, "role=parent" }
    -- it writes nothing: only requeue_after brings it back, a second apart
    local t = kube.wait_for("p3 to tick four times", 30, function()
      local ticks = ticks_of("p3")
      return #ticks >= 4 and ticks
    end)
    for i = 3, 4 do
      local gap = t[i] - t[i - 1]
      assert.is_true(gap >= 0.95 and gap < 2.5, ("ticks %d and %d were %.2f s apart"):format(i - 1, i, gap))
    end
  end)

  -- A controller whose reconcile of `name` waits on a latch (a file the spec
  -- creates), so it is surely running when SIGTERM comes; once open, the
  -- reconcile marks the ConfigMap done. Started, SIGTERMed, and seen waiting
  -- for that reconcile; returns luaop's handle and the latch's path.
  local function draining(name, flags)
    local latch = os.tmpname()
    os.remove(latch)
    finally(function() os.remove(latch) end)
    local drained = luaop.start(([[
      local luaop = require "luaop"
      return luaop.controller {
        name = "latched", resource = "v1/ConfigMap", namespace = %q, label_selector = "latched=%s",
        reconcile = function(ctx, req)
          print("started " .. req.name)
          io.stdout:flush()
          while not io.open(%q) do luaop.sleep(0.02) end
          assert(ctx:patch("ConfigMap", req, { data = { done = "yes" } }))
          print("finished " .. req.name)
          io.stdout:flush()
        end,
      }
    ]]):format(ns, name, latch), { flags = flags })
    finally(drained.cleanup)
    kube.must { "create", "configmap", name, "-n", ns, "--from-literal=k=v" }
    kube.must { "label", "configmap", name, "-n", ns, "latched=" .. name }
    kube.wait_for("the reconcile to start", 30, function() return drained.stdout():find("started " .. name, 1, true) end)
    drained.signal("TERM")
    kube.wait_for("luaop to wait for the running reconcile", 10, function()
      return drained.stderr():find("stopping: waiting for running reconciles\t{[^\n]*}\n")
    end)
    -- still there, the reconcile unfinished
    assert.is_false(drained.exited(), drained.stderr())
    assert.is_nil(drained.stdout():find("finished " .. name, 1, true))
    return drained, latch
  end

  it("drains on SIGTERM: a running reconcile finishes, then luaop exits 0", function()
    local drained, latch = draining("s1")
    assert(io.open(latch, "w")):close()
    assert.are.equal(0, drained.stop(0))
    assert.matches("finished s1", drained.stdout())
    assert.are.equal("yes", kube.get("configmap", "s1", ns).data.done)
  end)

  it("waits 30 s by default for running reconciles on SIGTERM", function()
    local drained, latch = draining("g1")
    assert.matches("stopping: waiting for running reconciles\t{\"gracePeriod\": 30}", drained.stderr(), 1, true)
    assert(io.open(latch, "w")):close()
    assert.are.equal(0, drained.stop(0))
  end)

  it("gives up on a reconcile still running at the end of --graceful-shutdown-timeout, and exits 1", function()
    local drained = draining("g2", { "--graceful-shutdown-timeout", "1500ms" }) -- its latch never opens
    assert.matches("gracePeriod\": 1.5}", drained.stderr(), 1, true)
    local t0 = system.gettime()
    assert.are.equal(1, drained.stop(1))
    assert.is_true(system.gettime() - t0 < 10, "the drain outlived its grace period")
    assert.matches("reconciles still running at the end of the drain\t{\"active\": 1}", drained.stderr(), 1, true)
    assert.is_nil(drained.stdout():find("finished g2", 1, true))
  end)

  it("exits at once, with status 143, on a second SIGTERM while a reconcile still runs", function()
    local drained = draining("st1") -- its latch never opens
    drained.signal("TERM")
    -- stop() only waits now; its deadline (45 s) is well above "at once"
    local t0 = system.gettime()
    assert.are.equal(128 + 15, drained.stop(128 + 15))
    assert.is_true(system.gettime() - t0 < 5, "the second SIGTERM did not end it at once")
    assert.is_nil(drained.stdout():find("finished st1", 1, true))
  end)

  it("never runs one key twice at once with several workers, and runs different keys side by side", function()
    -- each reconcile logs when it begins and ends, and takes 0.2 s; one key
    -- is changed over and over while it runs, others come at the same time
    local multi = luaop.start(([[
      local luaop = require "luaop"
      return luaop.controller {
        name = "multi", resource = "v1/ConfigMap", namespace = %q, label_selector = "role=multi",
        concurrency = 4,
        reconcile = function(ctx, req)
          print(("begin %%s %%.6f"):format(req.name, luaop.time.wall()))
          io.stdout:flush()
          luaop.sleep(0.2)
          print(("end %%s %%.6f"):format(req.name, luaop.time.wall()))
          io.stdout:flush()
        end,
      }
    ]]):format(ns))
    finally(multi.cleanup)
    -- the four in one request, so that they come at once however slow each
    -- kubectl is (one by one, on a busy machine, they never overlapped)
    local items = {}
    for i = 1, 4 do
      items[i] = ('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"mk%d","namespace":"%s",' ..
        '"labels":{"role":"multi"}},"data":{"k":"v"}}'):format(i, ns)
    end
    kube.must({ "create", "-f", "-" }, '{"apiVersion":"v1","kind":"List","items":[' .. table.concat(items, ",") .. "]}")
    for i = 1, 8 do
      kube.must { "patch", "configmap", "mk1", "-n", ns, "--type=merge", "-p", ('{"data":{"k":"%d"}}'):format(i) }
    end
    kube.must { "patch", "configmap", "mk1", "-n", ns, "--type=merge", "-p", '{"data":{"k":"last"}}' }
    -- wait until mk1's reconciles have caught up (an end after the last patch, nothing running)
    kube.wait_for("mk1 and the others reconciled", 30, function()
      local out = multi.stdout()
      local b, e = select(2, out:gsub("begin mk1 ", "")), select(2, out:gsub("end mk1 ", ""))
      return b >= 2 and b == e and out:find("end mk4 ", 1, true)
    end)
    multi.stop()
    local running, overlap_other = {}, false
    local n = 0
    for what, name in multi.stdout():gmatch("(%a+) (mk%d) [%d.]+") do
      if what == "begin" then
        assert.is_nil(running[name], name .. " began again while it was running")
        for other in pairs(running) do if other ~= name then overlap_other = true end end
        running[name] = true
        n = n + 1
      else
        assert.is_true(running[name], name .. " ended without beginning")
        running[name] = nil
      end
    end
    assert.is_true(n >= 5, "too few reconciles to tell: " .. n)
    assert.is_true(overlap_other, "different keys never ran side by side with 4 workers")
  end)

  it("shares one informer between controllers that watch the same kind, namespace and selector", function()
    -- two controllers of ConfigMaps labelled role=shared, and a third that
    -- watches them: one LIST of configmaps for all three (the trace log
    -- has a line per answered request; a watch answers only when it ends)
    local two = luaop.start(([[
      local luaop = require "luaop"
      local ns = %q
      local function def(name, extra)
        local d = {
          name = name, resource = "v1/ConfigMap", namespace = ns, label_selector = "role=shared",
          reconcile = function(ctx, req) ctx.log:info("reconciled by " .. name, { key = req.name }) end,
        }
        for k, v in pairs(extra or {}) do d[k] = v end
        return luaop.controller(d)
      end
      return {
        def("first"), def("second"),
        def("third", { resource = "v1/Secret", watches = { { "v1/ConfigMap", namespace = ns, label_selector = "role=shared",
          map = function(cm) return { { namespace = ns, name = cm.metadata.name } } end } } }),
      }
    ]]):format(ns), { flags = { "--log-level", "trace" } })
    finally(two.cleanup)
    kube.wait_for("caches synced", 30, function() return two.stderr():find("caches synced", 1, true) end)
    kube.must { "create", "configmap", "sh1", "-n", ns, "--from-literal=k=v" }
    kube.must { "label", "configmap", "sh1", "-n", ns, "role=shared" }
    kube.wait_for("both controllers to reconcile sh1", 30, function()
      local err = two.stderr()
      return err:find("reconciled by first", 1, true) and err:find("reconciled by second", 1, true)
    end)
    two.stop()
    local lists = luaop.syncs(two.stderr(), "configmaps")
    assert.are.equal(1, lists, "syncs (LISTs or streamed) of configmaps")
  end)

  it("does not reconcile objects its selector leaves out", function()
    kube.must { "create", "configmap", "loner", "-n", ns, "--from-literal=k=v" }
    -- a parent made after loner: once it is reconciled, the watch has gone
    -- past loner's creation
    kube.must { "create", "configmap", "p-after", "-n", ns, "--from-literal=k=v" }
    kube.must { "label", "configmap", "p-after", "-n", ns, "role=parent" }
    kube.wait_for("p-after-child (made after loner)", 30, function() return child("p-after") end)
    assert.is_nil(child("loner"))
    assert.is_nil(run.stderr():find('"name": "loner"', 1, true), "loner was reconciled")
  end)
end)
