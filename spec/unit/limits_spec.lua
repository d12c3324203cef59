-- Budgets a script declares are capped by the command line's limits
-- (--max-instructions, --max-memory): a script cannot grant itself more.
-- Against the fake API server (its five ConfigMaps in default).
local luaop = require "support.luaop"
local fake = require "support.fake"
local volume = require "support.volume"
local kube = require "support.kube"

-- luaop (the spec's finally stops it) running controller "greedy", which
-- declares 10^15 instructions and 100Gi and reconciles with `body`, with
-- `flags` after --qps 0; returns its handle.
local function greedy(body, flags)
  local server = fake.start()
  finally(server.stop)
  local v = volume.new { ["greedy.lua"] = ([[
local luaop = require "luaop"
return luaop.controller {
  name = "greedy", resource = "v1/ConfigMap", namespace = "default",
  instructions = 1000000000000000, memory = "100Gi",
  reconcile = function(ctx, req)
    %s
  end,
}
]]):format(body) }
  finally(function() v:remove() end)
  local argv = { "--qps", "0" }
  for _, f in ipairs(flags or {}) do argv[#argv + 1] = f end
  local run = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig, flags = argv })
  finally(run.cleanup)
  return run
end

-- The line saying budget `what` (instructions, memory), declared as
-- `declared`, was cut down to `limit` by `flag`.
local function cut(what, declared, flag, limit)
  return ('a budget above the limit: using the limit\t{"budget": "%s", "controller": "greedy", "declared": %d, ' ..
    '"flag": "%%-%%-%s", "limit": %d}'):format(what, declared, flag:gsub("%-", "%%-"), limit)
end

describe("the command line's limits", function()
  it("cut a script's declared budgets down to --max-instructions and --max-memory, saying so", function()
    local run = greedy([[
    if req.name == "cm-0" then while true do end end
    if req.name == "cm-1" then
      local t = {}
      for i = 1, math.huge do t[i] = { i } end -- (string.rep would spend 2000000 instructions first)
    end]], { "--max-instructions", "2000000", "--max-memory", "8Mi" })
    local err = kube.wait_for("both budgets to stop their reconciles", 30, function()
      local e = run.stderr()
      return e:find("instruction budget of 2000000 exceeded", 1, true)
        and e:find("memory budget of 8388608 bytes exceeded", 1, true) and e
    end)
    assert.matches(cut("instructions", 1000000000000000, "max-instructions", 2000000), err)
    assert.matches(cut("memory", 107374182400, "max-memory", 8388608), err)
    assert.are.equal(0, run.stop(0))
  end)

  it("are 10^9 instructions and 1Gi by default", function()
    local run = greedy("")
    local err = kube.wait_for("both budgets cut down", 30, function()
      local e = run.stderr()
      local _, n = e:gsub("a budget above the limit: using the limit", "")
      return n >= 2 and e
    end)
    assert.matches(cut("instructions", 1000000000000000, "max-instructions", 1000000000), err)
    assert.matches(cut("memory", 107374182400, "max-memory", 1073741824), err)
    assert.are.equal(0, run.stop(0))
  end)
end)
