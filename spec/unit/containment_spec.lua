-- Containment, as a mounted ConfigMap would meet it: each budget attack
-- issue 13 found, in a script of its own (--script DIR), reconciling beside
-- a steady controller in the same process. Each attack fails its own
-- reconciles, logged with its file and line, and counted; the steady
-- controller keeps reconciling all along; a script whose top level attacks
-- on reload fails to load and leaves the rest running; SIGTERM ends the
-- process within its grace period. Against the fake API server (its five
-- ConfigMaps cm-0 .. cm-4 in default).
local luaop = require "support.luaop"
local fake = require "support.fake"
local volume = require "support.volume"
local kube = require "support.kube"
local attack = require "support.attacks"

-- name -> the attack (run by a reconcile of cm-0) and the error it must end in
local attacks = {
  pcall = { [[while true do pcall(function() while true do end end) end]], "instruction" },
  coroutine = { [[while true do pcall(coroutine.wrap(function() while true do end end)) end]], "instruction" },
  resume = { [[while true do coroutine.resume(coroutine.create(function() while true do end end)) end]],
    "instruction" },
  spawn = { [[luaop.spawn(function() while true do end end):wait()]], "instruction" },
  spawned = { [[for _ = 1, 100 do luaop.spawn(function() while true do end end) end]], "instruction" },
  pattern = { [[while true do pcall(string.find, ("a"):rep(3000), ".-.-.-b") end]], "instruction" },
  memory = { [[local t = {} while true do pcall(function() for i = 1, math.huge do t[#t + 1] = {} end end) end]],
    "memory" },
  -- (tables of 150 bytes: string.rep is charged per byte now, and its 64
  -- bytes a step would spend the instruction budget first)
  gcstop = { [[pcall(collectgarbage, "stop") local t = {} for i = 1, math.huge do t[i] = { i, i, i, i, i, i } end]],
    "memory" },
  finalizer = { [[setmetatable({}, { __gc = function() while true do end end })]],
    "__gc metamethods are not available to luaop scripts" },
}

describe("containment", function()
  it("stops every budget attack in its own reconcile, with file, line and a count, while another controller goes on", function()
    local files = { ["steady.lua"] = attack.steady }
    for name, a in pairs(attacks) do
      files["attack-" .. name .. ".lua"] = attack.script(name, a[1], "instructions = 2000000, memory = 4194304,")
    end
    local run, v = attack.start(files, { "--max-instructions", "5000000" })
    finally(run.cleanup)
    -- every attack failed at least twice (it is retried, and fails again)
    local missing
    local waited, err = pcall(kube.wait_for, "every attack's errors", 60, function()
      local e = run.stderr()
      for name, a in pairs(attacks) do
        missing = name
        local what = a[2] == "instruction" and "instruction budget of 2000000 exceeded"
          or a[2] == "memory" and "memory budget of 4194304 bytes exceeded" or a[2]
        local _, n = e:gsub("attack%-" .. name .. "%.lua:%d+: " .. what:gsub("%p", "%%%0"), "")
        if n < 2 then return nil end
      end
      return e
    end)
    assert(waited, ("%s: attack %s\n%s"):format(err, missing, run.stderr():sub(-3000)))
    for name in pairs(attacks) do
      assert.matches("controller%.attack%-" .. name .. "\tReconciler error", err)
    end
    -- a top level that attacks on reload: refused, the rest runs on
    files["attack-toplevel.lua"] = "local n = 0\nwhile true do pcall(function() while true do n = n + 1 end end) end\n"
    v:update(files)
    err = kube.wait_for("the top level's failed load", 30, function()
      local e = run.stderr()
      return e:find("script reload failed", 1, true) and e
    end)
    assert.matches("attack%-toplevel%.lua:2: instruction budget of 5000000 exceeded", err)
    -- the steady controller reconciled all along: no gap of a second between ticks
    attack.check_steady(run, 1, 10)
    attack.check_stop(run)
    -- and the breaches were counted: every logged one, the top level's among them
    local out = run.stderr()
    local _, logged = out:gsub("budget of %d+[%a ]* exceeded", "")
    local counted = tonumber(out:match('stopped\t{[^\n]*"budget_breaches": (%d+)'))
    assert.is_not_nil(counted, out)
    -- a failed reconcile is logged once; a failed load twice (the error and the reload failure)
    assert.is_true(counted >= 16 and counted <= logged, ("%d counted, %d logged"):format(counted, logged))
  end)

  it("ends a reconcile that breaches its budget deep in luaop's own Lua at the script's line, while another controller goes on", function()
    -- (the breach's place was found by lua_getstack at each level, each
    -- walking the stack from the top: quadratic in its depth, seconds
    -- inside the count hook 100,000 calls deep in luaop.copy of a table
    -- that holds itself, and the watchdog's exit 70)
    local run = attack.start {
      ["steady.lua"] = attack.steady,
      ["attack-copy.lua"] = attack.script("copy", "local t = {} t.t = t while true do pcall(luaop.copy, t) end",
        "instructions = 4000000,"),
    }
    finally(run.cleanup)
    local err = kube.wait_for("the attack's errors", 60, function()
      assert(not run.exited(), "luaop exited: " .. run.stderr():sub(-2000))
      local e = run.stderr()
      local _, n = e:gsub("attack%-copy%.lua:7: instruction budget of 4000000 exceeded", "")
      return n >= 2 and e
    end)
    assert.is_nil(err:find("without waiting for too long", 1, true), err)
    attack.check_steady(run, 1, 2)
    attack.check_stop(run)
  end)

  it("keeps what a watch's map function changes in its objects from every other controller", function()
    local server = fake.start()
    finally(server.stop)
    local v = volume.new {
      -- a's map changes the object it is given and what it reads from the cache
      ["a.lua"] = [[
local luaop = require "luaop"
return luaop.controller {
  name = "a", resource = "v1/ConfigMap", namespace = "default",
  watches = { { "v1/ConfigMap", namespace = "default", map = function(o, ctx)
    ctx.log:info("a's map sees", { got = o.metadata.name })
    o.metadata.name = "changed-by-a"
    for _, other in ipairs(ctx:list("v1/ConfigMap", { namespace = "default" })) do other.data = { by = "a" } end
    local got = ctx:get("v1/ConfigMap", { namespace = "default", name = "cm-2" })
    if got then got.metadata.labels = { by = "a" } end
    return {}
  end } },
  reconcile = function() end,
}
]],
      -- b reconciles the same kind, from the same informer, and its map
      -- changes what it is given too (whichever map runs second would see
      -- the other's change, were they given one object)
      ["b.lua"] = [[
local luaop = require "luaop"
return luaop.controller {
  name = "b", resource = "v1/ConfigMap", namespace = "default",
  watches = { { "v1/ConfigMap", namespace = "default", map = function(o, ctx)
    ctx.log:info("b's map sees", { got = o.metadata.name })
    o.metadata.name = "changed-by-b"
    return {}
  end } },
  reconcile = function(ctx, req)
    local o = ctx:get("v1/ConfigMap", req)
    ctx.log:info("b sees", { name = o.metadata.name, data = o.data and o.data.by or "none",
      labels = o.metadata.labels and o.metadata.labels.by or "none" })
  end,
}
]] }
    finally(function() v:remove() end)
    local run = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig, flags = { "--qps", "0" } })
    finally(run.cleanup)
    local err = kube.wait_for("b's five reconciles", 30, function()
      local e = run.stderr()
      return select(2, e:gsub("b sees", "")) >= 5 and e
    end)
    for i = 0, 4 do
      assert.matches('b sees\t{"data": "none", "labels": "none", "name": "cm%-' .. i .. '"', err)
      assert.matches("a's map sees\t{\"got\": \"cm%-" .. i .. '"', err)
      assert.matches("b's map sees\t{\"got\": \"cm%-" .. i .. '"', err)
    end
    assert.is_nil(err:find("changed-by-", 1, true))
    assert.is_nil(err:find("event handler failed", 1, true), err)
    assert.are.equal(0, run.stop())
  end)
end)
