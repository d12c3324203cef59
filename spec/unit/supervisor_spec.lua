-- The runtime's long-lived tasks under luaop.supervisor: one that raises is
-- logged with its traceback, counted and started again after a backoff;
-- /readyz fails while an informer a controller needs is dead, and /healthz
-- while tasks keep dying. The faults are put in by a trusted program (the
-- informer's run made to raise: what goes wrong in a list or a watch is a
-- list/watch failure, which does not end the task), against the fake API
-- server.
local luaop = require "support.luaop"
local fake = require "support.fake"
local kube = require "support.kube"
local proc = require "support.proc"

local get = proc.http
local serving = { "--health-probe-bind-address", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0" }

-- A program whose informer's task raises `times` times (then works),
-- running a controller of the fake server's ConfigMaps; before: Lua run
-- first (supervisor is luaop.supervisor).
local function program(times, before)
  return ([[
local luaop = require "luaop"
local supervisor = require "luaop.supervisor"
%s
local informer = require "luaop.informer"
local Informer = getmetatable(informer.new("Secret", { client = {} })).__index
local run, raised = Informer.run, 0
function Informer.run(self)
  if raised < %d then
    raised = raised + 1
    assert(self:relist()) -- (synced first: /readyz has a change to show)
    error("injected fault " .. raised)
  end
  return run(self)
end
return luaop.controller { name = "steady", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function() end }
]]):format(before or "", times)
end

local function start(source)
  local server = fake.start()
  finally(server.stop)
  local run = luaop.start(source, { kubeconfig = server.kubeconfig, flags = serving })
  finally(run.cleanup)
  local port, mport
  kube.wait_for("the servers' ports", 10, function()
    local err = run.stderr()
    port = err:match('"name": "health probe"[^\n]*"port": (%d+)')
    mport = err:match('Serving metrics server[^\n]*"port": (%d+)')
    return port and mport
  end)
  return run, "http://127.0.0.1:" .. port, "http://127.0.0.1:" .. mport
end

describe("luaop.supervisor", function()
  it("starts a failed informer again after a backoff, logging its traceback and counting it, and /readyz "
    .. "fails while it is dead", function()
    -- before: the informer's task ended with nothing logged, and /readyz
    -- stayed 200
    local run, probes, metrics = start(program(1, "supervisor.MIN_BACKOFF = 2"))
    kube.wait_for("/readyz failing while the informer is dead", 20, function()
      return get(probes .. "/readyz") == 500
    end)
    local _, body = get(probes .. "/readyz")
    assert.matches("a cache not synced or not running", body)
    kube.wait_for("/readyz again once it runs", 20, function() return get(probes .. "/readyz") == 200 end)
    local err = run.stderr()
    assert.matches('a runtime task failed: starting it again\t{[^\n]*"error": "[^\n]*injected fault 1\\nstack traceback:'
      .. '[^\n]*"name": "v1/ConfigMap"[^\n]*"retryIn": [%d.]+[^\n]*"task": "informer"', err)
    assert.matches("not ready: a cache is not synced or not running", err)
    assert.matches("ready: every cache synced and running", err)
    local _, text = get(metrics .. "/metrics")
    assert.matches('luaop_task_restarts_total{task="informer"} 1\n', text, 1, true)
    assert.are.equal(200, (get(probes .. "/healthz")))
    run.stop(0)
  end)

  it("fails /healthz while tasks keep dying, and passes again once they stopped for a while", function()
    local run, probes = start(program(4,
      "supervisor.MIN_BACKOFF, supervisor.DEATHS, supervisor.WINDOW = 0.05, 3, 4"))
    kube.wait_for("/healthz failing", 20, function() return get(probes .. "/healthz") == 500 end)
    local _, body = get(probes .. "/healthz")
    assert.matches("a task of the runtime keeps failing", body)
    -- four deaths, then it runs: healthy again 4 s after the last
    kube.wait_for("/healthz passing again", 20, function() return get(probes .. "/healthz") == 200 end)
    kube.wait_for("/readyz passing", 10, function() return get(probes .. "/readyz") == 200 end)
    local _, deaths = run.stderr():gsub("a runtime task failed", "")
    assert.are.equal(4, deaths)
    run.stop(0)
  end)
  it("has the defaults the docs give: 5 deaths in 10 minutes fail /healthz; client-go's backoff; an informer's "
    .. "60 s for a streamed sync, 90 s for a LIST page, 5 to 10 minute watches", function()
    local code, out, err = luaop.run([[
      local s, i = require "luaop.supervisor", require "luaop.informer"
      print(s.DEATHS, s.WINDOW, s.MIN_BACKOFF, s.MAX_BACKOFF, s.BACKOFF_RESET, i.MIN_BACKOFF, i.MAX_BACKOFF,
        i.BACKOFF_RESET, i.INITIAL_EVENTS_TIMEOUT, i.LIST_TIMEOUT, i.WATCH_TIMEOUT[1], i.WATCH_TIMEOUT[2],
        require("luaop.client").WATCH_SLACK)
    ]], { offline = true })
    assert.are.equal(0, code, err)
    assert.are.equal("5\t600\t0.8\t30\t120\t0.8\t30\t120\t60\t90\t300\t600\t30", out:match("[^\n]+"))
  end)
end)
