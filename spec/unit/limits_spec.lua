-- Budgets a script declares are capped by the command line's limits
-- (--max-instructions, --max-memory): a script cannot grant itself more.
-- Against the fake API server (its five ConfigMaps in default).
local luaop = require "support.luaop"
local fake = require "support.fake"
local volume = require "support.volume"
local kube = require "support.kube"

describe("the command line's limits", function()
  it("cut a script's declared budgets down to --max-instructions and --max-memory, saying so", function()
    local server = fake.start()
    finally(server.stop)
    local v = volume.new { ["greedy.lua"] = [[
local luaop = require "luaop"
return luaop.controller {
  name = "greedy", resource = "v1/ConfigMap", namespace = "default",
  instructions = 1000000000000000, memory = "100Gi",
  reconcile = function(ctx, req)
    if req.name == "cm-0" then while true do end end
    if req.name == "cm-1" then
      local t = {}
      for i = 1, math.huge do t[i] = { i } end -- (string.rep would spend 2000000 instructions first)
    end
  end,
}
]] }
    finally(function() v:remove() end)
    local run = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig,
      flags = { "--qps", "0", "--max-instructions", "2000000", "--max-memory", "8Mi" } })
    finally(run.cleanup)
    local err = kube.wait_for("both budgets to stop their reconciles", 30, function()
      local e = run.stderr()
      return e:find("instruction budget of 2000000 exceeded", 1, true)
        and e:find("memory budget of 8388608 bytes exceeded", 1, true) and e
    end)
    assert.matches('a budget above the limit: using the limit\t{"budget": "instructions", "controller": "greedy", ' ..
      '"declared": 1000000000000000, "flag": "%-%-max%-instructions", "limit": 2000000}', err)
    assert.matches('a budget above the limit: using the limit\t{"budget": "memory", "controller": "greedy", ' ..
      '"declared": 107374182400, "flag": "%-%-max%-memory", "limit": 8388608}', err)
    assert.are.equal(0, run.stop(0))
  end)

  it("are 10^9 instructions and 1Gi by default", function()
    local server = fake.start()
    finally(server.stop)
    local v = volume.new { ["greedy.lua"] = [[
local luaop = require "luaop"
return luaop.controller {
  name = "greedy", resource = "v1/ConfigMap", namespace = "default",
  instructions = 1000000000000000, memory = "100Gi",
  reconcile = function() end,
}
]] }
    finally(function() v:remove() end)
    local run = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig, flags = { "--qps", "0" } })
    finally(run.cleanup)
    local err = kube.wait_for("both budgets cut down", 30, function()
      local e = run.stderr()
      local _, n = e:gsub("a budget above the limit: using the limit", "")
      return n >= 2 and e
    end)
    assert.matches('"budget": "instructions", "controller": "greedy", "declared": 1000000000000000, ' ..
      '"flag": "%-%-max%-instructions", "limit": 1000000000}', err)
    assert.matches('"budget": "memory", "controller": "greedy", "declared": 107374182400, ' ..
      '"flag": "%-%-max%-memory", "limit": 1073741824}', err)
    assert.are.equal(0, run.stop(0))
  end)
end)
