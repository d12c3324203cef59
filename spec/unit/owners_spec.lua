-- What a script holds is its own and bounded. Its tasks: each version of a
-- script (its top level, its reconciles and every task they spawn) has at
-- most --max-tasks of them live at once, and they all end when that version
-- is replaced or the script removed. Its watches: at most 100 open at once.
-- Before, a reconcile's spawned tasks outlived it with no cap (20,000 a
-- reconcile, requeued at once, took luaop to 1.8 GB), a script's top-level
-- tasks kept running after it was removed, and a script's watches had no
-- cap (10,664 descriptors in 40 s).
local kube = require "support.kube"
local attack = require "support.attacks"

-- the lines of `log` that match `pattern`
local function count(log, pattern)
  return select(2, log:gsub(pattern, ""))
end

describe("what a script holds", function()
  it("its tasks are capped by --max-tasks per script: a spawn past it raises at the script's line, another script goes on", function()
    -- each reconcile spawns sleepers until refused, then asks to run again
    -- at once: every later reconcile is refused at its first spawn
    local flood = attack.script("flood", [[
    local n = 0
    while true do
      local ok, err = pcall(function() luaop.spawn(function() luaop.sleep(86400) end) end)
      if not ok then
        ctx.log:info("flood refused", { started = n, error = err })
        return luaop.requeue_after(0.01)
      end
      n = n + 1
    end]])
    local run = attack.start({ ["flood.lua"] = flood, ["steady.lua"] = attack.steady }, { "--max-tasks", "300" })
    finally(run.cleanup)
    local log = kube.wait_for("50 refused reconciles", 60, function()
      assert(not run.exited(), "luaop exited: " .. run.stderr():sub(-2000))
      local e = run.stderr()
      return count(e, "flood refused") >= 50 and e
    end)
    -- the first reconcile started 299 (itself the 300th), each later one none
    local started = {}
    for n in log:gmatch('flood refused[^\n]*"started": (%d+)') do started[#started + 1] = tonumber(n) end
    assert.are.equal(299, started[1])
    for i = 2, #started do assert.are.equal(0, started[i]) end
    assert.matches('flood%.lua:%d+: 300 tasks of this script are live, the most it may have %(%-%-max%-tasks%)', log)
    -- the steady controller (another script, its own cap) ticks on
    local n0 = count(run.stderr(), "steady tick")
    kube.wait_for("more steady ticks", 30, function() return count(run.stderr(), "steady tick") > n0 + 5 end)
    attack.check_stop(run)
  end)

  it("its tasks end when their script is replaced or removed, wherever they were started", function()
    local function script(version)
      return ([[
local luaop = require "luaop"
luaop.spawn(function()
  while true do
    luaop.logger("alive"):info("top %s")
    luaop.sleep(0.05)
  end
end)
return luaop.controller {
  name = "owned", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function(ctx, req)
    if req.name ~= "cm-0" then return end
    luaop.spawn(function()
      while true do
        ctx.log:info("spawned %s")
        luaop.sleep(0.05)
      end
    end)
  end,
}
]]):format(version, version)
    end
    local run, v = attack.start { ["owned.lua"] = script("v1"), ["steady.lua"] = attack.steady }
    finally(run.cleanup)
    local function both(version)
      kube.wait_for("the tasks of " .. version, 30, function()
        assert(not run.exited(), "luaop exited: " .. run.stderr():sub(-2000))
        local e = run.stderr()
        return count(e, "top " .. version) >= 3 and count(e, "spawned " .. version) >= 3
      end)
    end
    -- the count of `version`'s lines, once it holds still for a second
    local function settled(version)
      local last, since = -1, nil
      return kube.wait_for(version .. "'s tasks to stop", 30, function()
        local e = run.stderr()
        local n = count(e, "top " .. version) + count(e, "spawned " .. version)
        if n ~= last then
          last, since = n, os.time()
          return false
        end
        return os.time() - since >= 2 and n
      end)
    end
    both("v1")
    v:update { ["owned.lua"] = script("v2"), ["steady.lua"] = attack.steady }
    kube.wait_for("the reload", 30, function() return run.stderr():find("script reloaded") end)
    both("v2")
    local v1 = settled("v1")
    -- v2's tasks go on meanwhile: it is only v1's that ended
    local n2 = count(run.stderr(), "top v2")
    kube.wait_for("v2 going on", 30, function() return count(run.stderr(), "top v2") > n2 + 5 end)
    assert.are.equal(v1, count(run.stderr(), "top v1") + count(run.stderr(), "spawned v1"))
    -- removed: its tasks end too, and the steady script goes on
    v:update { ["steady.lua"] = attack.steady }
    kube.wait_for("the removal", 30, function() return run.stderr():find("script removed") end)
    settled("v2")
    local n0 = count(run.stderr(), "steady tick")
    kube.wait_for("more steady ticks", 30, function() return count(run.stderr(), "steady tick") > n0 + 5 end)
    attack.check_stop(run)
  end)

  it("a replaced version's tasks end once its reconciles running then have finished on the old code", function()
    local testing = require "luaop.testing"
    -- v's reconcile of cm-0 starts a task that ticks every second, then
    -- works for `hold` seconds
    local function script(v, hold)
      return ([[
local luaop = require "luaop"
return luaop.controller {
  name = "owned", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function(ctx, req)
    if req.name ~= "cm-0" then return end
    luaop.spawn(function() while true do ctx.log:info("tick %s") luaop.sleep(1) end end)
    luaop.sleep(%d)
    ctx.log:info("finished %s")
  end,
}
]]):format(v, hold, v)
    end
    local env = testing.env { objects = {
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "cm-0", namespace = "default" } } } }
    finally(function() env:stop() end)
    local function n(msg) return #env:logs { msg = msg } end
    env:load("owned.lua", script("v1", 10))
    env:advance(3)
    local before = n("tick v1")
    assert.is_true(before >= 3)
    env:load("owned.lua", script("v2", 0)) -- while v1's reconcile works
    env:advance(3)
    -- v1's reconcile goes on, and so does what it started
    assert.are.equal(0, n("finished v1"))
    assert.is_true(n("tick v1") >= before + 3)
    env:advance(10)
    assert.are.equal(1, n("finished v1")) -- on the old code, not ended
    assert.are.equal(1, n("finished v2")) -- the key again, on the new code
    -- then v1's tasks end; v2's go on
    local v1, v2 = n("tick v1"), n("tick v2")
    env:advance(10)
    assert.are.equal(v1, n("tick v1"))
    assert.is_true(n("tick v2") >= v2 + 9)
    -- and the kit, stopped, ends what the scripts left running
    local owner = env.manager.owners["owned.lua"]
    assert.is_true(owner:live() > 0)
    env:stop()
    assert.are.equal(0, owner:live())
  end)

  it("its watches are at most 100 open: one more raises at its line; closed, ended or dropped ones free their place", function()
    local watcher = attack.script("watches", [[
    local function open(c)
      local ok, w = pcall(function() local w = c:watch("v1/ConfigMap") return w end)
      return ok and w or nil, not ok and w or nil
    end
    local c, ws, n, err = luaop.client(), {}, 0, nil
    while n < 1000 do
      local w, e = open(c)
      if not w then err = e break end
      n = n + 1
      ws[n] = w
    end
    -- a second client of the same script shares its quota
    local other = luaop.client { namespace = "kube-system" }
    local shared = open(other) == nil
    for i = 1, 10 do ws[i]:close() end -- closed: 10 places
    -- (each one opened kept: one dropped would free its place whenever
    -- the collector ran in this loop)
    local after_close = 0
    for _ = 1, 20 do
      local w = open(c)
      if w then after_close = after_close + 1; ws[#ws + 1] = w end
    end
    -- one read to its end (the fake server ends each watch after two events)
    local w11 = ws[11]
    while w11:next() do end
    local after_end = open(c) ~= nil
    -- all dropped and collected: every place back
    ws = nil
    collectgarbage("collect")
    collectgarbage("collect")
    local after_gc = 0
    for _ = 1, 100 do if open(other) then after_gc = after_gc + 1 end end
    ctx.log:info("watches", { opened = n, error = err, shared = shared, after_close = after_close,
      after_end = after_end, after_gc = after_gc })]])
    local run = attack.start { ["watches.lua"] = watcher, ["steady.lua"] = attack.steady }
    finally(run.cleanup)
    local log = kube.wait_for("the watches' report", 60, function()
      assert(not run.exited(), "luaop exited: " .. run.stderr():sub(-2000))
      local e = run.stderr()
      return e:find("\twatches\t") and e
    end)
    local line = log:match("\twatches\t([^\n]*)")
    assert.matches('"opened": 100', line)
    assert.matches('"error": "[^"]*watches%.lua:%d+: 100 watches of this script are open, the most it may have', line)
    assert.matches('"shared": true', line)
    assert.matches('"after_close": 10', line)
    assert.matches('"after_end": true', line)
    assert.matches('"after_gc": 100', line)
    local n0 = count(run.stderr(), "steady tick")
    kube.wait_for("more steady ticks", 30, function() return count(run.stderr(), "steady tick") > n0 + 5 end)
    attack.check_stop(run)
  end)
end)
