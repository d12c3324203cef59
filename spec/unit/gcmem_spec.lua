-- Memory the Lua collector frees goes back to the system (src/gcmem.c): a
-- process's RSS follows its live heap down, instead of staying at its
-- peak as glibc's heap otherwise does.
local proc = require "support.proc"
local luaop = require "support.luaop"

-- A program's start: RSS before and at the peak of 60 MB or so of small
-- tables and strings (like a LIST's decoded pages), t the garbage (dropped,
-- not yet collected), keep 3,000 tables made after it.
local GARBAGE = [[
local function rss()
  local f = assert(io.open("/proc/self/status"))
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)"))
end
collectgarbage("collect")
local before = rss()
local keep, t = {}, {}
for i = 1, 300000 do t[i] = { name = "object-" .. i, n = i } end
for i = 1, 3000 do keep[i] = { name = "kept-" .. i } end
local peak = rss()
t = nil -- luacheck: ignore 311
]]

describe("the Lua collector", function()
  it("gives the memory of a collected cycle's garbage back to the system (RSS falls with the heap)", function()
    local dir = proc.tempdir()
    finally(function() os.execute("rm -rf '" .. dir .. "'") end)
    local program = proc.write(dir, "garbage.lua", GARBAGE .. [[
collectgarbage("collect")
print(before, peak, rss(), #keep)
]])
    local code, out, err = proc.run { luaop.bin, "--kubeconfig", luaop.offline(), "--program", program }
    assert.are.equal(0, code, err)
    local before, peak, after = out:match("^(%d+)\t(%d+)\t(%d+)\t3000")
    before, peak, after = tonumber(before), tonumber(peak), tonumber(after)
    assert(before, out)
    assert.is_true(peak - before > 20000, ("the garbage took only %d KiB"):format(peak - before))
    -- without the trim at the end of the cycle RSS stays at the peak
    assert.is_true(after - before < (peak - before) / 4,
      ("RSS %d KiB before, %d at the peak, %d after the collection"):format(before, peak, after))
  end)
  it("gives nothing back at a cycle's end while held (core.gcmem_hold: an informer's sync), and does once let go",
    function()
    local dir = proc.tempdir()
    finally(function() os.execute("rm -rf '" .. dir .. "'") end)
    local program = proc.write(dir, "held.lua", GARBAGE .. [[
local core = require "luaop.core"
core.gcmem_hold(true)
collectgarbage("collect")
local held = rss()
core.gcmem_hold(false)
collectgarbage("collect")
print(before, peak, held, rss(), #keep)
]])
    local code, out, err = proc.run { luaop.bin, "--kubeconfig", luaop.offline(), "--program", program }
    assert.are.equal(0, code, err)
    local before, peak, held, after = out:match("^(%d+)\t(%d+)\t(%d+)\t(%d+)\t3000")
    before, peak, held, after = tonumber(before), tonumber(peak), tonumber(held), tonumber(after)
    assert(before, out)
    local grown = peak - before
    assert.is_true(grown > 20000, ("the garbage took only %d KiB"):format(grown))
    local what = ("RSS %d KiB before, %d at the peak, %d after a held cycle, %d after the next"):format(before, peak,
      held, after)
    assert.is_true(held - before > grown * 3 / 4, what)
    assert.is_true(after - before < grown / 4, what)
  end)
  it("finishes its cycle once the process goes quiet, so a burst's garbage does not stay (luaop.collector)", function()
    local dir = proc.tempdir()
    finally(function() os.execute("rm -rf '" .. dir .. "'") end)
    local program = proc.write(dir, "quiet.lua", [[
local luaop = require "luaop"
local stop = false
if arg[1] == "on" then require("luaop.collector").start(function() return stop end) end
collectgarbage("collect")
local base = collectgarbage("count")
-- a burst: a sync's or reconciles' garbage, some 20 MB, then nothing
do
  local t = {}
  for i = 1, 200000 do t[i] = { i } end
end
local peak = collectgarbage("count")
local deadline = luaop.time.monotonic() + 4
while collectgarbage("count") > base + 1024 and luaop.time.monotonic() < deadline do luaop.sleep(0.1) end
stop = true
print(("%d %d %d"):format(base // 1, peak // 1, collectgarbage("count") // 1))
]])
    local function run(mode)
      local code, out, err = proc.run { luaop.bin, "--kubeconfig", luaop.offline(), "--program", program, "--", mode }
      assert.are.equal(0, code, err)
      local base, peak, after = out:match("^(%d+) (%d+) (%d+)")
      assert(base, out)
      return tonumber(base), tonumber(peak), tonumber(after)
    end
    local base, peak, after = run("on")
    assert.is_true(peak - base > 4096, ("the burst left only %d KiB of garbage"):format(peak - base))
    assert.is_true(after < base + 1024, ("heap %d KiB before, %d after the burst, %d once quiet"):format(base, peak, after))
    -- and without it, the garbage stays: what the spec would see if it broke
    base, peak, after = run("off")
    assert.is_true(after > base + 1024, ("without luaop.collector: %d, %d, %d KiB"):format(base, peak, after))
  end)
  it("arms its end-of-cycle trim again after a task past its memory budget ran the last one (core.gcmem_rearm)",
    function()
    local dir = proc.tempdir()
    finally(function() os.execute("rm -rf '" .. dir .. "'") end)
    local program = proc.write(dir, "hog.lua", [[
local core = require "luaop.core"
print("before", core.gcmem_rearm())
-- past its budget, the task ends a cycle: the sentinel's finalizer runs
-- there and cannot allocate the next one
local t = core.task.spawn_limited({ instructions = 1e9, memory = 4 * 1024 * 1024, name = "hog" }, function()
  pcall(function() local x = {} for i = 1, 1e7 do x[i] = { i } end end)
  -- a step as large as a whole cycle: "collect", charged before it
  -- starts, raises at once past a budget (src/charge_lib.h)
  collectgarbage("step", 1 << 20)
end)
t:wait()
print("after", core.gcmem_rearm())
print("again", core.gcmem_rearm())
]])
    local code, out, err = proc.run { luaop.bin, "--kubeconfig", luaop.offline(), "--program", program }
    assert.are.equal(0, code, err)
    assert.matches("before\ttrue\tfalse\n", out) -- armed from the start
    assert.matches("after\ttrue\ttrue\n", out) -- lost in the hog, armed again
    assert.matches("again\ttrue\tfalse\n", out)
  end)
end)
