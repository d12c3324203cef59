-- Tasks on the loop without a cluster: spawn and wait, sleep, conditions.
local luaop = require "support.luaop"

describe("tasks", function()
  it("wake every waiter of a condition, from the loop, after the signaller goes on", function()
    local code, out, err = luaop.run([[
      local luaop = require "luaop"
      local cond = require("luaop.core").task.cond()
      local order = {}
      local waiters = {}
      for i = 1, 3 do
        waiters[i] = luaop.spawn(function()
          order[#order + 1] = "wait" .. i
          cond:wait()
          order[#order + 1] = "woke" .. i
          return i
        end)
      end
      order[#order + 1] = "signal " .. cond:signal()
      order[#order + 1] = "after signal"
      for i = 1, 3 do assert(select(2, waiters[i]:wait()) == i) end
      print(table.concat(order, ","))
      print("nobody waiting", cond:signal())
    ]], { offline = true })
    assert.are.equal(0, code, err)
    assert.matches("wait1,wait2,wait3,signal 3,after signal,woke1,woke2,woke3", out, 1, true)
    assert.matches("nobody waiting\t0", out)
  end)

  it("wait on a condition for at most a timeout: false when it came first, true when signalled, no waiter left behind", function()
    local code, out, err = luaop.run([[
      local luaop = require "luaop"
      local core = require "luaop.core"
      local cond = core.task.cond()
      local t0 = core.task.now()
      local timed = luaop.spawn(function() return cond:wait(0.1), core.task.now() - t0 end)
      local signalled = luaop.spawn(function() return cond:wait(5), core.task.now() - t0 end)
      local forever = luaop.spawn(function() return cond:wait(), core.task.now() - t0 end)
      local _, r1, at1 = timed:wait()
      print("timed", r1, at1 >= 0.1 and at1 < 0.5)
      print("still waiting", cond:signal())
      local _, r2, at2 = signalled:wait()
      local _, r3 = forever:wait()
      print("signalled", r2, at2 < 1, r3)
    ]], { offline = true })
    assert.are.equal(0, code, err)
    assert.matches("timed\tfalse\ttrue", out)
    assert.matches("still waiting\t2", out) -- the timed-out one is gone
    assert.matches("signalled\ttrue\ttrue\ttrue", out)
  end)

  it("take a sleep of NaN as none, and one of math.huge (or a key delayed by it) as waiting, not as a crash", function()
    local code, out, err = luaop.run([[
      local core = require "luaop.core"
      local luaop = require "luaop"
      local forever = luaop.spawn(function() luaop.sleep(math.huge) end)
      local nan = luaop.spawn(function() luaop.sleep(0 / 0) return "woke" end)
      local q = core.workqueue.new()
      q:add_after("far", math.huge)
      q:add("now")
      local taker = luaop.spawn(function() return q:take() end)
      print("nan", select(2, nan:wait()), "take", select(2, taker:wait()), "far", q:stats().waiting)
      os.exit(0)
    ]], { offline = true, deadline = 20 })
    assert.are.equal(0, code, err)
    assert.matches("nan\twoke\ttake\tnow\tfar\t1", out)
  end)

  it("never end a sleep early", function()
    local code, out, err = luaop.run([[
      local luaop = require "luaop"
      local core = require "luaop.core"
      local early, tasks = 0, {}
      for i = 1, 300 do
        local d = (i % 37) / 1000 + (i % 3) * 0.0004
        tasks[i] = luaop.spawn(function()
          local t0 = core.task.now()
          luaop.sleep(d)
          if core.task.now() - t0 < d then early = early + 1 end
        end)
      end
      for _, t in ipairs(tasks) do t:wait() end
      print("early", early)
    ]], { offline = true })
    assert.are.equal(0, code, err)
    assert.matches("early\t0", out)
  end)

  it("name an error object by its reason and message, or its type, without running its metamethods, and where it was raised", function()
    local code, out, err = luaop.run([[
      local luaop = require "luaop"
      local function raise(v) return select(2, luaop.spawn(function() error(v) end):wait()) end
      -- an API error, as the client makes them; its __tostring never ends
      print(raise(setmetatable({ code = 409, reason = "Conflict", message = "the object has been modified" },
        { __tostring = function() while true do end end })))
      print(raise({ message = "only a message" }))
      print(raise({}))
      print(raise(true))
      print(raise(42))
    ]], { offline = true, deadline = 20 })
    assert.are.equal(0, code, err)
    -- a value raised carries no position: the place of the error call is put in front
    assert.matches("^[^\n]*%.lua:2: Conflict %(409%): the object has been modified\nstack traceback:", out)
    assert.matches("\n[^\n]*%.lua:2: only a message\nstack traceback:", out)
    assert.matches("\n[^\n]*%.lua:2: %(error object is a table value%)\nstack traceback:", out)
    assert.matches("\n[^\n]*%.lua:2: %(error object is a boolean value%)\nstack traceback:", out)
    assert.matches("\n42\nstack traceback:", out)
  end)

  it("sleep in order of their deadlines and report errors through wait", function()
    local code, out, err = luaop.run([[
      local luaop = require "luaop"
      local order = {}
      local ts = {}
      for _, d in ipairs { 0.06, 0.02, 0.04 } do
        ts[#ts + 1] = luaop.spawn(function() luaop.sleep(d); order[#order + 1] = d end)
      end
      for _, t in ipairs(ts) do t:wait() end
      print(table.concat(order, " "))
      local ok, e = luaop.spawn(function() luaop.sleep(0); error({}) end):wait()
      print("failed", ok, type(e))
    ]], { offline = true })
    assert.are.equal(0, code, err)
    assert.matches("0.02 0.04 0.06", out, 1, true)
    assert.matches("failed\tfalse\tstring", out)
  end)

  it("stop a program at once on SIGTERM, with status 143", function()
    local run = luaop.start([[
      print("sleeping")
      io.stdout:flush()
      require("luaop").sleep(3600)
    ]], { offline = true })
    finally(run.cleanup)
    local system = require "system"
    local deadline = system.gettime() + 10
    while not run.stdout():find("sleeping", 1, true) and system.gettime() < deadline do system.sleep(0.02) end
    assert.are.equal(143, run.stop(143))
    assert.matches("stopping", run.stderr())
  end)

  it("stop a task that runs past its instruction budget, and only that task", function()
    local code, out, err = luaop.run([[
      local luaop = require "luaop"
      local task = require("luaop.core").task
      local other = luaop.spawn(function() luaop.sleep(0.05); return "other fine" end)
      local ok, e = task.spawn_limited(1000000, function() while true do end end):wait()
      print("runaway", ok, e:match("instruction budget of 1000000 exceeded") ~= nil)
      print("small", task.spawn_limited(1000000, function() local x = 0; for i = 1, 1000 do x = x + i end; return x end):wait())
      print(select(2, other:wait()))
    ]], { offline = true, deadline = 20 }) -- a runaway that is not stopped fails fast
    assert.are.equal(0, code, err)
    assert.matches("runaway\tfalse\ttrue", out)
    assert.matches("small\ttrue\t500500", out)
    assert.matches("other fine", out)
  end)

  it("charge what a task allocates to its instruction budget, an instruction per 32 bytes", function()
    local out = luaop.ok([[
      local luaop = require "luaop"
      local task = require("luaop.core").task
      local s = ("x"):rep(1 << 20) -- 1 MiB, made outside any budget
      -- a hundred instructions or so each: 2 and 20 strings of 2 MiB made
      -- (about 0.13 and 1.3 million instructions' worth)
      local function concat(n) for _ = 1, n do local _ = s .. s end return "done" end
      print("few", task.spawn_limited(1000000, concat, 2):wait())
      print("many", task.spawn_limited(1000000, concat, 20):wait())
    ]], { offline = true, deadline = 20 })
    assert.matches("few\ttrue\tdone", out)
    assert.matches("many\tfalse\t[^\n]*instruction budget of 1000000 exceeded", out)
  end)

  it("stop a call that runs past its instruction budget, and go on in the same task", function()
    local out = luaop.ok([[
      local luaop = require "luaop"
      local task = require("luaop.core").task
      print("runaway", task.call_limited(1000000, function() while true do end end))
      print("results", task.call_limited(1000000, function(a, b) return a + b, "two" end, 1, 2))
      print("raises", task.call_limited(1000000, error, "boom", 0))
      -- a breach the code caught (an xpcall whose handler can allocate nothing once breached)
      print("caught", task.call_limited(1000000, xpcall, function() while true do end end,
        function(e) return "handled: " .. tostring(e) end))
      print("no wait", task.call_limited(1000000, luaop.sleep, 0))
      -- inside a budgeted task: the call's own budget, its use charged to the task
      print("outer", task.spawn_limited(3000000, function()
        for _ = 1, 3 do
          task.call_limited(1000000, function() local x = 0; for i = 1, 50000 do x = x + i end end)
        end
        while true do end
      end):wait())
      print("bad", pcall(task.call_limited, 0, print))
    ]], { offline = true, deadline = 20 })
    assert.matches("runaway\tfalse\t[^\n]*instruction budget of 1000000 exceeded", out)
    assert.matches("results\ttrue\t3\ttwo", out)
    assert.matches("raises\tfalse\tboom", out)
    assert.matches("caught\tfalse\t[^\n]*instruction budget of 1000000 exceeded", out)
    assert.matches("no wait\tfalse\ttask.sleep waits, and the code calling it must not", out)
    assert.matches("outer\tfalse\t[^\n]*instruction budget of 3000000 exceeded", out)
    assert.matches("bad\tfalse\t[^\n]*an instruction budget must be positive", out)
  end)

  it("stop a task that grows past its memory budget, and only that task", function()
    local code, out, err = luaop.run([[
      local luaop = require "luaop"
      local task = require("luaop.core").task
      local other = luaop.spawn(function() luaop.sleep(0.05); return ("x"):rep(4 << 20):len() end)
      local kept = {}
      local ok, e = task.spawn_limited({ memory = 8 << 20 }, function()
        for i = 1, 1e9 do kept[i] = ("%d"):format(i):rep(16) end
      end):wait()
      print("hog", ok, e:match("memory budget of 8388608 bytes exceeded") ~= nil, #kept > 1000)
      kept = nil
      -- garbage does not count: a task that churns through far more than
      -- its budget in short-lived strings is fine
      print("churn", task.spawn_limited({ memory = 8 << 20 }, function()
        local n = 0
        for i = 1, 200000 do n = n + #(("%d"):format(i):rep(64)) end
        return n > 8 << 20
      end):wait())
      print("both", task.spawn_limited({ memory = 8 << 20, instructions = 1000 }, function() while true do end end):wait())
      print("other", select(2, other:wait()))
    ]], { offline = true, deadline = 20 })
    assert.are.equal(0, code, err)
    assert.matches("hog\tfalse\ttrue\ttrue", out)
    assert.matches("churn\ttrue\ttrue", out)
    assert.matches("both\tfalse\t[^\n]*instruction budget of 1000 exceeded", out)
    assert.matches("other\t4194304", out)
  end)

  it("refuse a malformed budget", function()
    local code, _, err = luaop.run([[
      require("luaop.core").task.spawn_limited({ memory = -1 }, function() end)
    ]], { offline = true })
    assert.are.equal(1, code)
    assert.matches("bad budget: memory must be a positive integer", err)
  end)

  it("refuse to wait outside a task", function()
    local code, _, err = luaop.run([[
      local co = coroutine.wrap(function() require("luaop").sleep(0) end)
      co()
    ]], { offline = true })
    assert.are.equal(1, code)
    assert.matches("can only be called from a luaop task", err)
  end)

  it("stop a budget breach that the task catches, in a coroutine of its own or a task it spawns, and count it", function()
    -- each attack ends at its budget within LIMIT s: 15 on the release build,
    -- 40 on the ASan build, which runs the same budget several times slower (a
    -- raise and its unwinding most: "error object", 5 to 13 s under ASan on
    -- 2 loaded cores). A ceiling that only a budget never enforced reaches,
    -- not a measure of speed.
    local code, out, err = luaop.run(("local LIMIT = %g\n"):format(luaop.bin:find("asan", 1, true) and 40 or 15) .. [[
      local core = require "luaop.core"
      local luaop = require "luaop"
      local function spin() while true do end end
      local attacks = {
        { "pcall", function() while true do pcall(spin) end end },
        { "nested pcall", function() while true do pcall(function() while true do pcall(spin) end end) end end },
        { "xpcall handler", function() while true do xpcall(spin, spin) end end },
        { "error object", function() while true do pcall(function() while true do pcall(error, {}) end end) end end },
        { "coroutine", function() coroutine.wrap(spin)() end },
        { "coroutine pcall", function() while true do pcall(coroutine.wrap(spin)) end end },
        { "coroutine resume", function() while true do coroutine.resume(coroutine.create(spin)) end end },
        { "spawned", function() luaop.spawn(spin):wait() end },
        { "spawned, not waited", function() luaop.spawn(spin) while true do pcall(spin) end end },
        { "many spawned", function()
          while true do luaop.spawn(function() local x = 0 for i = 1, 1e5 do x = x + i end end) end
        end },
        { "memory pcall", function()
          local t = {}
          while true do pcall(function() for i = 1, math.huge do t[#t + 1] = ("x"):rep(64) .. i end end) end
        end },
        { "memory then loop", function()
          local t = {}
          pcall(function() for i = 1, math.huge do t[#t + 1] = ("x"):rep(64) .. i end end)
          t = nil
          while true do pcall(spin) end
        end },
      }
      local ticks = 0
      luaop.spawn(function() while true do ticks = ticks + 1 luaop.sleep(0.001) end end)
      local before = core.counters().budget_breaches
      for _, a in ipairs(attacks) do
        local t0, seen = core.task.now(), ticks
        local ok, e = core.task.spawn_limited({ instructions = 10000000, memory = 4 * 1024 * 1024 }, a[2]):wait()
        luaop.sleep(0.01)
        -- named at the file and line where it stopped, whichever task of the account it was
        print(a[1], ok, (tostring(e):match("^[^\n]*%.lua:%d+: ([%a ]+budget of %d+[%a ]+exceeded)")),
          ("%.1f"):format(core.task.now() - t0) + 0 < LIMIT, ticks > seen)
      end
      print("breaches", core.counters().budget_breaches - before)
    ]], { offline = true })
    assert.are.equal(0, code, err)
    for _, name in ipairs { "pcall", "nested pcall", "xpcall handler", "error object", "coroutine", "coroutine pcall",
                            "coroutine resume", "spawned", "spawned, not waited", "many spawned" } do
      assert.matches("\n" .. name:gsub("%p", "%%%0") .. "\tfalse\tinstruction budget of 10000000 exceeded\ttrue\ttrue", "\n" .. out)
    end
    for _, name in ipairs { "memory pcall", "memory then loop" } do
      assert.matches("\n" .. name .. "\tfalse\tmemory budget of 4194304 bytes exceeded\ttrue\ttrue", "\n" .. out)
    end
    assert.matches("breaches\t12", out)
  end)

  it("stop a backtracking pattern at the instruction budget, in find, match, gmatch and gsub alike", function()
    local code, out, err = luaop.run([[
      local core = require "luaop.core"
      local s = ("a"):rep(3000)
      local cases = {
        { "find", function() return s:find(".-.-.-b") end },
        { "match", function() return string.match(s, ".-.-.-b") end },
        { "gmatch", function() for _ in s:gmatch(".-.-.-b") do end end },
        { "gsub", function() return (s:gsub(".-.-.-b", "x")) end },
        { "pcall", function() while true do pcall(string.find, s, ".-.-.-b") end end },
      }
      for _, c in ipairs(cases) do
        local t0 = core.task.now()
        local ok, e = core.task.spawn_limited(10000000, c[2]):wait()
        print(c[1], ok, (tostring(e):match("instruction budget of %d+ exceeded")), core.task.now() - t0 < 10)
      end
      -- the same library, unbudgeted, still matches as Lua's does
      local i, j = s:find("a+$")
      print("plain", i, j, ("k=v"):match("^(%w+)=(%w+)$"))
    ]], { offline = true })
    assert.are.equal(0, code, err)
    for _, name in ipairs { "find", "match", "gmatch", "gsub", "pcall" } do
      assert.matches("\n" .. name .. "\tfalse\tinstruction budget of 10000000 exceeded\ttrue", "\n" .. out)
    end
    assert.matches("plain\t1\t3000\tk\tv", out)
  end)
end)
