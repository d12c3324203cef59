-- Task threads belong to the scheduler: a task's thread (what
-- coroutine.running() gives a reconcile) is resumed only when what it
-- waits for comes, exactly once. A script's coroutine.resume, close or
-- yield of one raises; trusted code's (a --program has the real coroutine
-- library) leaves the task waiting, or fails that task only, saying why.
-- Before, a task that resumed a waiting reconcile left it with two pending
-- wake-ups, and the second touched the freed task (a use-after-free, a
-- SIGSEGV in the release build). spec/c/sched_test.c checks the same
-- through the scheduler's C API: a stray wake-up is dropped in C.
local luaop = require "support.luaop"
local kube = require "support.kube"
local attack = require "support.attacks"

-- A reconcile of cm-0 whose spawned task drives the reconcile's thread while
-- it sleeps, and that yields its own thread; a steady controller beside it.
local drivers = [[
local luaop = require "luaop"
return luaop.controller {
  name = "drivers", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function(ctx, req)
    if req.name ~= "cm-0" then return end
    local me = coroutine.running()
    local seen = {}
    luaop.spawn(function()
      luaop.sleep(0) -- the reconcile waits in its sleep by now
      seen.status = coroutine.status(me)
      seen.resume = select(2, pcall(function() local ok = coroutine.resume(me, "made up") return ok end))
      seen.close = select(2, pcall(function() local ok = coroutine.close(me) return ok end))
      seen.wrapped = select(2, pcall(coroutine.wrap(function() local ok = coroutine.resume(me) return ok end)))
    end)
    local t0 = luaop.time.monotonic()
    local woke = luaop.sleep(0.3)
    local slept = luaop.time.monotonic() - t0
    -- (before, a task whose thread a script resumed held two wake-ups: it
    -- ended on one and the other resumed the freed task)
    luaop.sleep(0.05)
    local yielded = select(2, pcall(function() local r = coroutine.yield("to whom?") return r end))
    -- a coroutine of the script's own still resumes, yields and closes
    local gen = coroutine.wrap(function() coroutine.yield(1) coroutine.yield(2) end)
    local own = coroutine.create(function() coroutine.yield() end)
    coroutine.resume(own)
    ctx.log:info("drivers done", {
      status = seen.status, resume = tostring(seen.resume), close = tostring(seen.close),
      wrapped = tostring(seen.wrapped), yield = tostring(yielded), woke = tostring(woke),
      slept_enough = slept >= 0.3, own = gen() + gen(), closed = coroutine.close(own),
    })
  end,
}
]]

describe("task threads", function()
  it("refuse a script's coroutine.resume, close and yield of a reconcile's thread, saying why, and it sleeps on undisturbed", function()
    local run = attack.start { ["drivers.lua"] = drivers, ["steady.lua"] = attack.steady }
    finally(run.cleanup)
    local err = kube.wait_for("the reconcile's report", 30, function()
      local e = run.stderr()
      if run.exited() then error("luaop exited:\n" .. e:sub(-3000)) end
      return e:find("drivers done", 1, true) and e
    end)
    local line = err:match("[^\n]*drivers done[^\n]*")
    local function field(name)
      return line:match('"' .. name .. '": ("[^"]*")') or line:match('"' .. name .. '": ([^,}]*)')
    end
    local function refused(what)
      return '^"[^"]*/drivers%.lua:%d+: coroutine%.' .. what .. ": the coroutine is a luaop task's own thread, which only " ..
        "luaop's scheduler resumes, closes or suspends\"$"
    end
    assert.matches(refused("resume"), field("resume"), nil, line)
    assert.matches(refused("close"), field("close"), nil, line)
    assert.matches(refused("resume"), field("wrapped"), nil, line)
    assert.matches('^"[^"]*/drivers%.lua:%d+: coroutine%.yield outside a coroutine the script made: the running one is ' ..
      "a luaop task's own thread", field("yield"), nil, line)
    assert.are.equal('"suspended"', field("status"), line)
    assert.are.equal('"nil"', field("woke"), line) -- no made-up value came out of the sleep
    assert.are.equal("true", field("slept_enough"), line)
    assert.are.equal("3", field("own"), line)
    assert.are.equal("true", field("closed"), line)
    -- and luaop goes on: the steady controller ticks after it, and it stops cleanly
    local n0 = select(2, run.stderr():gsub("steady tick", ""))
    kube.wait_for("more steady ticks", 30, function()
      return select(2, run.stderr():gsub("steady tick", "")) > n0 + 3
    end)
    assert.is_nil(run.stderr():find("Reconciler error", 1, true), run.stderr():sub(-3000))
    assert.are.equal(0, run.stop())
  end)

  it("stay waiting when trusted code resumes one: its values are dropped, and each wait ends once, when its wake-up comes", function()
    local out = luaop.ok([[
      local luaop = require "luaop"
      local core = require "luaop.core"
      local threads, woke = {}, {}
      local cond, q = core.task.cond(), core.workqueue.new()
      local sleeper = luaop.spawn(function()
        threads.sleep = coroutine.running()
        local t0 = core.task.now()
        local got = luaop.sleep(0.2)
        woke[#woke + 1] = "sleep " .. tostring(got) .. " " .. tostring(core.task.now() - t0 >= 0.2)
        luaop.sleep(0.1) -- the first sleep's wake-up must not end this one early
        return "slept"
      end)
      local waiter = luaop.spawn(function()
        threads.cond = coroutine.running()
        local got = cond:wait()
        woke[#woke + 1] = "cond " .. tostring(got)
      end)
      local taker = luaop.spawn(function()
        threads.take = coroutine.running()
        local got = q:take()
        woke[#woke + 1] = "take " .. tostring(got)
      end)
      local joiner = luaop.spawn(function()
        threads.join = coroutine.running()
        local got = select(2, sleeper:wait())
        woke[#woke + 1] = "join " .. tostring(got)
      end)
      -- another task drives each waiting thread, as a script could not
      luaop.spawn(function()
        for _, name in ipairs { "sleep", "cond", "take", "join" } do
          print(name, coroutine.status(threads[name]), coroutine.resume(threads[name], "made up", 42))
        end
      end):wait()
      q:add("key")
      cond:signal()
      for _, t in ipairs { waiter, taker, joiner } do assert(t:wait()) end
      table.sort(woke)
      print(table.concat(woke, ","))
    ]], { offline = true, deadline = 20 })
    for _, name in ipairs { "sleep", "cond", "take", "join" } do
      assert.matches("\n?" .. name .. "\tsuspended\ttrue\n", out)
    end
    assert.matches("cond true,join slept,sleep nil true,take key\n", out, nil, true)
  end)

  it("end a chain of tasks each waiting for the next one after another, never one inside another (30,000 of them)", function()
    -- before, a task's end woke the task waiting for it inside its own
    -- end: a C resume nested per task, which Lua does not count, until the
    -- C stack ran out (a SIGSEGV, from a script's reconcile too)
    local out = luaop.ok([[
      local luaop = require "luaop"
      local n, handles = 30000, {}
      for i = n, 1, -1 do
        local next_one = handles[i + 1]
        handles[i] = luaop.spawn(function()
          if next_one then
            local ok, v = next_one:wait()
            assert(ok, v)
            return v + 1
          end
          luaop.sleep(0.01) -- every other task waits by now
          return 0
        end)
      end
      print("chain", select(2, handles[1]:wait()))
    ]], { offline = true, deadline = 60 })
    assert.matches("chain\t29999\n", out)
  end)

  it("give every task its turn while one loops on luaop.sleep(0), and hold no memory for its sleeps", function()
    -- before, each sleep of 0 was a timer due at once, which libuv ran in
    -- the same pass over timers: the pass never ended, the other
    -- controllers never ran, SIGTERM was never seen, and each sleep's memory
    -- (freed once the pass was over) grew past a gigabyte in seconds
    local run = attack.start { ["steady.lua"] = attack.steady,
      ["attack-sleep0.lua"] = attack.script("sleep0", "while true do luaop.sleep(0) end") }
    finally(run.cleanup)
    -- the default budget ends it, after some 10^7 sleeps: meanwhile the
    -- steady controller ticks every 50 ms, never a second apart
    local log = kube.wait_for("the loop's budget error", 60, function()
      assert(not run.exited(), "luaop exited: " .. run.stderr():sub(-2000))
      local e = run.stderr()
      return e:find("attack%-sleep0%.lua:%d+: instruction budget of 100000000 exceeded") and e
    end)
    local ended = attack.stamps(log, "Reconciler error")[1]
    local ticks, n = attack.stamps(log, "steady tick"), 0
    for i = 2, #ticks do
      if ticks[i] < ended then
        n = n + 1
        assert.is_true(ticks[i] - ticks[i - 1] < 1, ("the steady controller waited %.2f s"):format(ticks[i] - ticks[i - 1]))
      end
    end
    assert.is_true(n >= 20, "the steady controller ticked " .. n .. " times while the loop ran")
    local f = assert(io.open("/proc/" .. run.pid() .. "/status"))
    local peak = tonumber(f:read("a"):match("VmHWM:%s*(%d+) kB"))
    f:close()
    -- (the ASan build's allocator keeps 256 MB of what was freed, its quarantine)
    local most = luaop.bin:find("asan", 1, true) and 700 or 200
    assert.is_true(peak < most * 1024, ("luaop's peak RSS: %d kB"):format(peak))
    attack.check_stop(run)
  end)

  it("fail a task that yields outside a wait, or whose thread trusted code closes while it waits, saying why", function()
    local out = luaop.ok([[
      local luaop = require "luaop"
      local ok, err = luaop.spawn(function() coroutine.yield("to whom?") end):wait()
      print("yield", ok, (err:match("^[^\n]*")))
      local thread
      local t = luaop.spawn(function()
        thread = coroutine.running()
        luaop.sleep(0.05)
        return "went on"
      end)
      print("close", coroutine.close(thread))
      ok, err = t:wait()
      print("closed", ok, (err:match("^[^\n]*")))
      print("after", luaop.spawn(function() luaop.sleep(0.01) return "fine" end):wait())
    ]], { offline = true, deadline = 20 })
    assert.matches("yield\tfalse\t[^\n]*:2: coroutine%.yield in a task's own thread, outside any coroutine the task " ..
      "made: a task yields only to wait", out)
    assert.matches("close\ttrue\n", out)
    assert.matches("closed\tfalse\tits thread was closed %(coroutine%.close%) while it waited\n", out)
    assert.matches("after\ttrue\tfine\n", out)
  end)
end)
