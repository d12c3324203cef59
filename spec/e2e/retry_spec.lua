-- A controller's retry policy and terminal errors on the local control
-- plane: a reconcile that returns luaop.terminal(...) runs once, leaves a
-- Warning Event kubectl shows and counts at /metrics; a failing reconcile
-- backs off from the definition's retry.base_delay, doubling to its
-- max_delay, as the reconciles' log time stamps show.
local kube = require "support.kube"
local luaop = require "support.luaop"
local volume = require "support.volume"
local proc = require "support.proc"
local attack = require "support.attacks"

describe("retries on the API server", function()
  local ns, run, vol

  before_each(function()
    ns = kube.new_namespace("e2e-retry")
  end)

  after_each(function()
    if run then run.cleanup() end
    if vol then vol:remove() end
    run, vol = nil, nil
    kube.delete_namespace(ns)
  end)

  -- luaop with a controller "retrying" of ConfigMaps in ns whose reconcile
  -- logs "reconciled" with the object's name, then does what its data.do
  -- says; retry: the definition's retry field (Lua text)
  local function start(retry)
    vol = volume.new { ["retrying.lua"] = ([[
local luaop = require "luaop"
return luaop.controller {
  name = "retrying", resource = "v1/ConfigMap", namespace = %q,
  retry = %s,
  reconcile = function(ctx, req)
    local cm = ctx:get("ConfigMap", req)
    if not cm or not cm.data then return end
    ctx.log:info("reconciled", { object = req.name })
    if cm.data["do"] == "terminal" then return luaop.terminal("spec.schedule is not a time") end
    if cm.data["do"] == "raise" then error("not yet") end
  end,
}
]]):format(ns, retry) }
    run = luaop.start({ vol.dir }, { flags = { "--metrics-bind-address", "127.0.0.1:0" } })
    return run
  end

  local function reconciles(name)
    return attack.stamps(run.stderr(), '\treconciled\t{[^\n]*"object": "' .. name .. '"')
  end

  it("does not retry a terminal error: one reconcile, a Warning Event kubectl shows, the counter at /metrics is 1",
    function()
    start("nil")
    local port = tonumber(kube.wait_for("the metrics port", 15, function()
      return run.stderr():match('Serving metrics server\t{[^}]*"port": (%d+)')
    end))
    kube.must { "create", "configmap", "bad", "-n", ns, "--from-literal=do=terminal" }
    local e = kube.wait_for("the TerminalError Event", 30, function()
      local items = kube.json.decode(kube.must { "get", "events.v1.events.k8s.io", "-n", ns, "-o", "json" }).items
      for _, ev in ipairs(items) do
        if ev.reason == "TerminalError" then return ev end
      end
    end)
    assert.are.equal("Warning", e.type)
    assert.are.equal("bad", e.regarding.name)
    -- (returned in a tail call: at the reconcile's line)
    assert.matches("^terminal error: .*retrying%.lua:5: %(controller retrying's reconcile%) spec%.schedule is not a "
      .. "time$", e.note)
    local shown = kube.must { "events", "-n", ns, "--for", "configmap/bad" }
    assert.matches("TerminalError", shown)
    -- another object reconciled after it: a retry of the first (5 ms,
    -- 10 ms, ... by default) would have run several times by then
    kube.must { "create", "configmap", "after", "-n", ns, "--from-literal=do=nothing" }
    kube.wait_for("the later object's reconcile", 30, function() return #reconciles("after") == 1 end)
    assert.are.equal(1, #reconciles("bad"), run.stderr())
    assert.matches('Reconciler error\t{[^\n]*"error": "terminal error: [^\n]*spec%.schedule is not a time"',
      run.stderr())
    local ok, body = proc.sh(("curl -s -m 5 http://127.0.0.1:%d/metrics"):format(port))
    assert.is_true(ok, body)
    assert.matches('\ncontroller_runtime_terminal_reconcile_errors_total{controller="retrying"} 1\n', body, 1, true)
    assert.matches('\ncontroller_runtime_reconcile_errors_total{controller="retrying"} 1\n', body, 1, true)
    assert.matches('\ncontroller_runtime_reconcile_panics_total{controller="retrying"} 0\n', body, 1, true)
    run.stop()
  end)

  it("backs a failing reconcile off from the definition's retry.base_delay, doubling to its max_delay", function()
    start("{ base_delay = 0.5, max_delay = 1 }")
    kube.must { "create", "configmap", "failing", "-n", ns, "--from-literal=do=raise" }
    local t = kube.wait_for("five reconciles", 30, function()
      local s = reconciles("failing")
      return #s >= 5 and s
    end)
    local gaps = {}
    for i = 2, 5 do gaps[#gaps + 1] = t[i] - t[i - 1] end
    local shown = ("waits of %.3f, %.3f, %.3f, %.3f s"):format(table.unpack(gaps))
    -- 0.5 s, then 1 s each: never client-go's 5 ms, and capped (doubling
    -- on would wait 2 s, then 4 s)
    assert.is_true(gaps[1] >= 0.49 and gaps[1] < 0.95, shown)
    for i = 2, 4 do assert.is_true(gaps[i] >= 0.99 and gaps[i] < 1.9, shown) end
    run.stop()
  end)
end)
