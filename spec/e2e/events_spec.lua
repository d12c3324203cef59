-- Events on the local control plane: ctx:event writes events.k8s.io/v1
-- Events with the fields kubectl events shows; repeats merge into a series
-- and a flood is cut down, as client-go's events broadcaster does; and the
-- core records a failed reconcile and a broken budget as Warning Events.
local kube = require "support.kube"
local luaop = require "support.luaop"
local volume = require "support.volume"

-- The events.k8s.io/v1 Events of namespace ns.
local function events(ns)
  local out = kube.must { "get", "events.v1.events.k8s.io", "-n", ns, "-o", "json" }
  return kube.json.decode(out).items
end

local function with_reason(ns, reason)
  local found = {}
  for _, e in ipairs(events(ns)) do
    if e.reason == reason then found[#found + 1] = e end
  end
  return found
end

describe("Events", function()
  local ns, runs

  before_each(function()
    ns = kube.new_namespace("e2e-events")
    kube.must { "create", "configmap", "target", "-n", ns, "--from-literal=k=v" }
    runs = {}
  end)

  after_each(function()
    for _, r in ipairs(runs) do
      r.run.cleanup()
      r.vol:remove()
    end
    kube.delete_namespace(ns)
  end)

  local function start(body, flags)
    local vol = volume.new { ["events.lua"] = ([[
local luaop = require "luaop"
return luaop.controller {
  name = "eventful", resource = "v1/ConfigMap", namespace = %q,
  instructions = 200000,
  reconcile = function(ctx, req)
    if req.name ~= "target" then return end
    local cm = ctx:get("ConfigMap", req)
    %s
  end,
}
]]):format(ns, body) }
    local run = luaop.start({ vol.dir }, { flags = flags })
    runs[#runs + 1] = { run = run, vol = vol }
    return run
  end

  it("are written by ctx:event as events.k8s.io/v1 Events, with the fields kubectl events shows", function()
    local run = start [[ctx:event(cm, "Normal", "Stamped", "stamped by the spec", "Stamp")]]
    local e = kube.wait_for("the Event", 15, function() return with_reason(ns, "Stamped")[1] end)
    assert.are.equal("Normal", e.type)
    assert.are.equal("Stamp", e.action)
    assert.are.equal("stamped by the spec", e.note)
    assert.are.equal("luaop/eventful", e.reportingController)
    assert.matches("^.+_%x+$", e.reportingInstance)
    assert.are.same({ "v1", "ConfigMap", "target", ns }, { e.regarding.apiVersion, e.regarding.kind,
      e.regarding.name, e.regarding.namespace })
    assert.is_string(e.regarding.uid)
    assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%d%d%d%dZ$", e.eventTime)
    -- and kubectl events (the core/v1 view) shows it on the ConfigMap
    local out = kube.must { "events", "-n", ns, "--for", "configmap/target" }
    assert.matches("Stamped", out)
    assert.matches("stamped by the spec", out)
    run.stop()
  end)

  it("merge repeats into one Event with a series, its count written when luaop stops", function()
    local run = start [[
      ctx:event(cm, "Normal", "Repeated", "again")
      ctx.log:info("emitted")
      return luaop.requeue_after(0.05)
    ]]
    kube.wait_for("a series", 15, function()
      local e = with_reason(ns, "Repeated")[1]
      return e and e.series and e.series.count == 2
    end)
    kube.wait_for("20 repeats", 15, function()
      local _, n = run.stderr():gsub("emitted", "")
      return n >= 20
    end)
    run.stop()
    local _, n = run.stderr():gsub("emitted", "")
    local found = with_reason(ns, "Repeated")
    assert.are.equal(1, #found)
    assert.are.equal(n, found[1].series.count)
    assert.is_string(found[1].series.lastObservedTime)
  end)

  it("cut a flood down: one object starts at most 25 Events at once", function()
    local run = start [[
      for i = 1, 300 do ctx:event(cm, "Warning", "Flood" .. i, "number " .. i) end
      ctx.log:info("flooded")
    ]]
    kube.wait_for("the flood", 15, function() return run.stderr():find("flooded", 1, true) end)
    run.stop()
    local n = 0
    for _, e in ipairs(events(ns)) do
      if e.reason:match("^Flood%d+$") then n = n + 1 end
    end
    assert.are.equal(25, n)
  end)

  it("cut a flood down across objects too: one controller starts at most 100 Events at once", function()
    local run = start [[
      for i = 1, 130 do
        local fake = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "fake-" .. i, namespace = cm.metadata.namespace } }
        ctx:event(fake, "Warning", "Spread", "number " .. i)
      end
      ctx.log:info("spread")
    ]]
    kube.wait_for("the flood", 15, function() return run.stderr():find("spread", 1, true) end)
    run.stop()
    assert.are.equal(100, #with_reason(ns, "Spread"))
  end)

  it("are recorded by the core for a failed reconcile and a broken budget, as Warnings", function()
    kube.must { "create", "configmap", "spin", "-n", ns, "--from-literal=k=v" }
    local vol = volume.new { ["failing.lua"] = ([[
local luaop = require "luaop"
return luaop.controller {
  name = "failing", resource = "v1/ConfigMap", namespace = %q, instructions = 200000,
  reconcile = function(ctx, req)
    if req.name == "target" then error("the spec's error") end
    if req.name == "spin" then while true do end end
  end,
}
]]):format(ns) }
    local run = luaop.start({ vol.dir })
    runs[#runs + 1] = { run = run, vol = vol }
    local err = kube.wait_for("a ReconcileError", 15, function() return with_reason(ns, "ReconcileError")[1] end)
    assert.are.equal("Warning", err.type)
    assert.are.equal("target", err.regarding.name)
    assert.matches("the spec's error", err.note)
    assert.are.equal("luaop/failing", err.reportingController)
    local budget = kube.wait_for("a BudgetExceeded", 15, function() return with_reason(ns, "BudgetExceeded")[1] end)
    assert.are.equal("Warning", budget.type)
    assert.are.equal("spin", budget.regarding.name)
    assert.matches("instruction budget of 200000 exceeded", budget.note)
    run.stop()
  end)

  it("refuse a malformed Event in the reconcile that made it", function()
    local run = start [[
      local ok, err = pcall(ctx.event, ctx, cm, "Loud", "Bad", "x")
      ctx.log:info("refused", { error = tostring(err) })
    ]]
    kube.wait_for("the refusal", 15, function() return run.stderr():find("refused", 1, true) end)
    -- (ctx:event's check, at the script's line, before events.record's own)
    assert.matches('ctx:event%(obj, type, reason, note %[, action%]%): type must be \\"Normal\\" or \\"Warning\\", '
      .. 'got the string \\"Loud\\"', run.stderr())
    run.stop()
  end)
end)
