-- luaop.worker: a controller's workers take keys from its queue and run
-- each reconcile in a budgeted task of its own, at most `concurrency` at
-- once and never one key twice at once; what reconcile returns is read as
-- done, requeue_after or requeue, anything else fails it; resync enqueues
-- every object again each period. Through the test kit.
local testing = require "luaop.testing"
local worker = require "luaop.worker"
local proc = require "support.proc"
local kit = require "support.kit"

local function cm(name, what) return kit.cm(name, { ["do"] = what }) end

describe("luaop.worker", function()
  local t = kit.per_test(before_each, after_each)

  it("runs at most `concurrency` reconciles at once, never one key twice at once", function()
    t.env = testing.env { script = proc.write(t.dir, "w.lua", [[
local luaop = require "luaop"
local running, most, by_key = 0, 0, {}
return luaop.controller {
  name = "w", resource = "v1/ConfigMap", namespace = "default", concurrency = 3,
  reconcile = function(ctx, req)
    running = running + 1
    by_key[req.name] = (by_key[req.name] or 0) + 1
    if running > most then most = running end
    if by_key[req.name] > 1 then ctx.log:error("twice at once " .. req.name) end
    luaop.sleep(1)
    running = running - 1
    by_key[req.name] = by_key[req.name] - 1
    ctx.log:info("done", { most = most })
  end,
}
]]) }
    for i = 1, 8 do t.env:create(cm("c" .. i)) end
    local c1 = t.env:get("ConfigMap", "c1")
    c1.data = { ["do"] = "again" }
    t.env:update(c1) -- an update while c1 runs: queued, not run beside it
    t.env:advance(10)
    local done = t.env:logs { msg = "^done$" }
    assert.are.equal(9, #done)
    assert.are.equal(3, done[#done].fields.most)
    assert.are.same({}, t.env:logs { level = "error" })
  end)

  it("fails a reconcile that returns anything but nothing, requeue_after or requeue, saying what it returned", function()
    t.env = testing.env { script = proc.write(t.dir, "w.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "w", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function(ctx, req) return "done" end }
]]), objects = { cm("x") } }
    local errors = t.env:logs { level = "error", msg = "^Reconciler error$" }
    assert.is_true(#errors >= 1)
    assert.matches("reconcile returned a string: return nothing, luaop.requeue_after%(seconds%), luaop.requeue%(%) or "
      .. "luaop.terminal%(message%)", errors[1].fields.error)
  end)

  it("reads what reconcile returned without running a metatable of the script's", function()
    local called = false
    local r = setmetatable({}, { __index = function() called = true return 1 end })
    assert.is_nil(worker.reconcile(function() return r end, nil, nil))
    assert.is_false(called)
    assert.are.same({ requeue_after = 2 }, worker.reconcile(function() return { requeue_after = 2 } end))
    assert.are.same({ requeue = true }, worker.reconcile(function() return { requeue = true } end))
    assert.has_error(function() worker.reconcile(function() return { requeue_after = -1 } end) end,
      "reconcile returned requeue_after = -1: a number of seconds >= 0 is needed")
  end)

  it("reconciles every object again each resync period, with nothing changed", function()
    t.env = testing.env { script = proc.write(t.dir, "w.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "w", resource = "v1/ConfigMap", namespace = "default", resync = 60,
  reconcile = function(ctx, req) ctx.log:info("reconciled " .. req.name) end }
]]), objects = { cm("x"), cm("y") } }
    assert.are.equal(2, #t.env:logs { msg = "^reconciled" })
    t.env:advance(59)
    assert.are.equal(2, #t.env:logs { msg = "^reconciled" })
    t.env:advance(1)
    assert.are.equal(4, #t.env:logs { msg = "^reconciled" })
    t.env:advance(120)
    assert.are.equal(8, #t.env:logs { msg = "^reconciled" })
  end)

  it("starts no worker once the manager or the controller stops (one would end at once, and be started again)", function()
    local supervisor = require "luaop.supervisor"
    local spawn, spawned = supervisor.spawn, 0
    supervisor.spawn = function()
      spawned = spawned + 1
      if spawned > 10 then error("started again and again") end
      return { name = "stub" }
    end
    local function controller()
      return { name = "c", def = { reconcile = function() end }, workers = 0, running = true, resyncing = true,
        metrics = { workers = { set = function() end } }, queue = { wake = function() end } }
    end
    local ok, err = pcall(worker.start_workers, { stopping = true, retired = {} }, controller())
    local c = controller()
    c.stopped = true
    local ok2, err2 = pcall(worker.start_workers, { retired = {} }, c)
    supervisor.spawn = spawn
    assert.is_true(ok, err)
    assert.is_true(ok2, err2)
    assert.are.equal(0, spawned)
  end)
  it("puts a reconcile's error that names no line of its script at the reconcile's own line, saying whose "
    .. "(a marker misused in a return, a wrong value returned)", function()
    t.env = testing.env { script = proc.write(t.dir, "r.lua", [[
local luaop = require "luaop"
return luaop.controller {
  name = "r", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function(ctx, req)
    if req.name == "fn" then return luaop.requeue_after end
    if req.name == "n" then return 30 end
    return luaop.requeue_after("abc")
  end,
}
]]) }
    for _, name in ipairs { "abc", "fn", "n" } do assert(t.env:create(kit.cm(name))) end
    local got = {}
    for _, l in ipairs(t.env:logs { msg = "^Reconciler error$" }) do
      got[l.fields.name] = l.fields.error:match("^[^\n]*")
    end
    local at = t.dir .. "/r.lua:4: (controller r's reconcile) "
    assert.are.same({
      abc = at .. 'requeue_after needs a number of seconds >= 0, got the string "abc"',
      fn = at .. "reconcile returned a function: return nothing, luaop.requeue_after(seconds), luaop.requeue() or "
        .. "luaop.terminal(message)",
      n = at .. "reconcile returned a number: return nothing, luaop.requeue_after(seconds), luaop.requeue() or "
        .. "luaop.terminal(message)",
    }, got)
  end)
end)
