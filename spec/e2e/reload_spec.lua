-- Hot reload on the local control plane: a controller's script, mounted the
-- way the kubelet mounts a ConfigMap, is swapped through ..data; the new
-- code takes over every object without a single new LIST request (the
-- informer is reused), a reconcile already running finishes on the old
-- code, and a broken version leaves the running one serving.
local kube = require "support.kube"
local luaop = require "support.luaop"
local volume = require "support.volume"

-- Stamps every ConfigMap labelled app=reload with annotation version=V. A
-- ConfigMap with data.latch waits until the ConfigMap it names exists (a
-- latch the spec opens; a script has no files).
local function operator(ns, version)
  return ([[
local luaop = require "luaop"
return luaop.controller {
  name = "stamper", resource = "v1/ConfigMap", namespace = %q, label_selector = "app=reload",
  concurrency = 2, -- a is stamped while b waits on its latch
  reconcile = function(ctx, req)
    local cm = ctx:get("ConfigMap", req)
    if not cm then return end
    ctx.log:info("reconciling", { version = %q })
    if cm.data and cm.data.latch then
      -- from the API server: ctx:get of the controller's own kind reads its cache
      while not luaop.client():get("ConfigMap", cm.data.latch, req.namespace) do luaop.sleep(0.05) end
    end
    local ann = cm.metadata.annotations or {}
    if ann.version ~= %q then
      local _, err = ctx:patch("ConfigMap", req, { metadata = { annotations = { version = %q } } })
      if err then error(err) end
    end
    ctx.log:info("done", { version = %q })
  end,
}
]]):format(ns, version, version, version, version)
end

-- LIST requests in a trace log: GETs of configmaps that are not watches.
-- The syncs of ConfigMaps in a trace log (LISTs and streamed ones)
local function lists(log) return luaop.syncs(log, "configmaps") end

describe("hot reload", function()
  local ns, vol, run, latch

  setup(function()
    ns = kube.new_namespace("e2e-reload")
    vol = volume.new { ["stamper.lua"] = operator(ns, "1") }
    run = luaop.start({ vol.dir }, { flags = { "--log-level", "trace" } })
  end)

  teardown(function()
    if run then
      run.stop()
      run.cleanup()
    end
    if vol then vol:remove() end
    if ns then kube.delete_namespace(ns) end
  end)

  local function version(name)
    local cm = kube.get("configmap", name, ns)
    return cm and cm.metadata.annotations and cm.metadata.annotations.version
  end

  local function stamped(name, v)
    return kube.wait_for(name .. " at version " .. v, 30, function() return version(name) == v end)
  end

  it("swaps the code through ..data without a new LIST, in-flight work finishing on the old code", function()
    for _, name in ipairs { "a", "b" } do
      kube.must { "create", "configmap", name, "-n", ns, "--from-literal=k=v" }
      kube.must { "label", "configmap", name, "-n", ns, "app=reload" }
    end
    stamped("a", "1")
    stamped("b", "1")
    assert.are.equal(1, lists(run.stderr()), "one LIST at start")

    -- b's next reconcile waits on a latch; reload while it waits
    latch = "latch-b"
    local patched = #run.stderr()
    kube.must { "patch", "configmap", "b", "-n", ns, "--type=merge", "-p", ('{"data":{"latch":"%s"}}'):format(latch) }
    kube.wait_for("b's latched reconcile", 10, function()
      for line in run.stderr():sub(patched):gmatch("[^\n]*reconciling[^\n]*") do
        if line:find('"name": "b"', 1, true) and line:find('"version": "1"', 1, true) then return true end
      end
    end)
    local before = #run.stderr()
    vol:update { ["stamper.lua"] = operator(ns, "2") }
    kube.wait_for("the reload", 10, function() return run.stderr():find("script reloaded", before, true) end)
    -- a is requeued and stamped by version 2 while b's reconcile still
    -- waits on version 1's code; then the latch opens
    stamped("a", "2")
    for line in run.stderr():sub(before):gmatch("[^\n]+") do
      assert.is_nil(line:find('"name": "b"', 1, true) and line:find("\tdone\t", 1, true), "b ended before its latch opened")
    end
    kube.must { "create", "configmap", latch, "-n", ns } -- stays: every later reconcile of b passes it

    stamped("b", "2")
    kube.must { "create", "configmap", "c", "-n", ns, "--from-literal=k=v" }
    kube.must { "label", "configmap", "c", "-n", ns, "app=reload" }
    stamped("c", "2")

    local log = run.stderr()
    local after = log:sub(before)
    assert.are.equal(0, lists(after), "no LIST after the reload")
    -- b's slow reconcile was running at the reload: it finished on version
    -- 1, and only then did version 2 start on b (never two at once)
    local events = {}
    for line in after:gmatch("[^\n]+") do
      if line:find('"name": "b"', 1, true) then
        events[#events + 1] = line:match("\t(%a+)\t{") .. " " .. line:match('"version": "(%d)"')
      end
    end
    assert.are.same({ "done 1", "reconciling 2", "done 2" }, { events[1], events[2], events[3] })
    assert.is_nil(after:find("Reconciler error", 1, true), after)
  end)

  it("keeps serving the old version when the new one is broken", function()
    local before = #run.stderr()
    vol:update { ["stamper.lua"] = "return require('luaop').controller {\n  name = 'stamper',\n" }
    kube.wait_for("the failed reload", 10, function()
      return run.stderr():find("script reload failed, the running version stays", before, true)
    end)
    assert.matches("stamper%.lua:3: unexpected symbol near <eof>", run.stderr():sub(before))
    kube.must { "create", "configmap", "d", "-n", ns, "--from-literal=k=v" }
    kube.must { "label", "configmap", "d", "-n", ns, "app=reload" }
    stamped("d", "2")
    assert.are.equal(0, lists(run.stderr():sub(before)))
  end)
end)
