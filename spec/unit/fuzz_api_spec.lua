-- What the api fuzzer (fuzz/api.c) found, each replayed as it ran there: a
-- program loaded as a --script (sandbox, budgets) into the test kit, its
-- controller reconciling a ConfigMap, the clock moved 30 s. Each runs in a
-- `luaop --test` process of its own (the binary under test: LUAOP_BIN, the
-- ASan build in spec/run.sh's second pass), so a memory error fails its spec
-- and not the runner. What must hold: the process lives, a sanitizer says
-- nothing, and another script's controller loaded beside it still
-- reconciles after the program ran.
local proc = require "support.proc"
local luaop_bin = require("support.luaop").bin

-- A kit spec running `program` beside a second script that logs each
-- ConfigMap it reconciles. The log lines (to stderr) are left out of a
-- failure's message; a sanitizer's report is kept.
local RUNNER = [==[
local testing = require "luaop.testing"
local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end
local DIR = %q
describe("a fuzzer finding", function()
  it("runs, and leaves the other script's controller reconciling", function()
    local env = testing.env { objects = { { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "fz", namespace = "default" }, data = { a = "1" } } } }
    env:load("other.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "other", resource = "v1/ConfigMap",
  reconcile = function(ctx, req) ctx.log:info("other reconciled", { name = req.name }) end }
]])
    pcall(env.load, env, "fuzz.lua", read(DIR .. "/program.lua"))
    pcall(env.advance, env, 30)
    env:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "after", namespace = "default" } }
    env:advance(1)
    local seen = false
    for _, l in ipairs(env:logs { msg = "^other reconciled$" }) do
      if l.fields.name == "after" then seen = true end
    end
    assert(seen, "the other script's controller did not reconcile after the program ran")
    env:stop()
  end)
end)
]==]

local function replay(program)
  local dir = proc.tempdir()
  proc.write(dir, "program.lua", program)
  proc.write(dir, "replay_spec.lua", RUNNER:format(dir))
  -- (LUAOP_TEST_LOG: log lines go through luaop's writer too, as in the harness)
  local code, out, err = proc.run({ luaop_bin, "--test", dir }, { LUAOP_TEST_LOG = "1" }, { sanitizer_ok = true })
  proc.sh("rm -rf " .. dir)
  local report = proc.sanitizer_report(err)
  assert.is_nil(report, report)
  assert.are.equal(0, code, out .. err)
  assert.matches("\n1 passed, 0 failed\n$", out)
end

-- Each finding: the program its input made (FUZZ_API_PRINT=1 build/fuzz/api
-- INPUT), as it ran; the input is in fuzz/corpus/api/ under the name given.
local FINDINGS = {}

-- 0f98892-resume-task-thread-found-by-fuzzing: a task spawned after the
-- reconcile's request resumes the reconcile's thread (T[1]) while it
-- waits; the reconcile then sleeps twice: one wake-up too many, and the
-- scheduler resumes a task it had freed (sched_step, heap-use-after-free;
-- SIGSEGV in the release build).
FINDINGS.resume = [=[
local luaop = require 'luaop'
local cjson = require 'cjson'
local V, T = {}, {}
-- a weak table of n entries: keys made at run time (or integers); values fresh arrays, objects or
-- strings; the values held strongly in V.strong too until a statement lets them go
local function W(mode, n, kind)
  local t, strong = setmetatable({}, { __mode = mode }), {}
  for i = 1, n do
    local v = kind % 3 == 0 and { i } or kind % 3 == 1 and { a = i, b = { i } } or ('v' .. i)
    t[kind < 3 and ('k' .. i) or i] = v
    strong[i] = v
  end
  V.strong = strong
  return t
end
local function D(n, leaf) local t = leaf for _ = 1, n do t = { t } end return t end
local function CLR(t) for k in next, t do t[k] = nil end end
local ONCE = false
return luaop.controller {
  name = 'fz', resource = 'v1/ConfigMap',
  reconcile = function(ctx, req)
    if ONCE then return end
    ONCE = true
    T[1] = coroutine.running()
    pcall(function() cjson.safe.encode_escape_forward_slash(nil, nil, false) end) pcall(function() V[1] = nil end) pcall(function() error(nil) end) pcall(function() V[2] = 115 end) pcall(function() V.task = luaop.spawn(function() T[#T + 1] = coroutine.running() pcall(function() ctx:list("v1/Secret") end) pcall(function() V.task = luaop.spawn(function() T[#T + 1] = coroutine.running() pcall(function() V[2] = 1 end) pcall(function() for _ = 1, 2 do  end end) pcall(function() V[1] = nil end)  end) end) pcall(function() V.task = luaop.spawn(function() T[#T + 1] = coroutine.running()  end) end)  end) end) pcall(function() V[1] = 0 end) pcall(function() V[1] = false end) pcall(function() V[1] = coroutine.running() end) pcall(function() V.task = luaop.spawn(function() T[#T + 1] = coroutine.running() pcall(function() ctx:list("v1/Secret") end) pcall(function() V.task = luaop.spawn(function() T[#T + 1] = coroutine.running() pcall(function() coroutine.resume(T[1], nil) end) pcall(function() V[1] = nil end) pcall(function() V[1] = setmetatable({}, {__add = function(...) local A = {...} pcall(function() collectgarbage("collect") end) pcall(function() coroutine.isyieldable(T[1], ("k"):rep(4) .. 255) end)  return nil end, __add = function(...) local A = {...}  return (0.5).n end, }) end)  end) end) pcall(function() V.task = luaop.spawn(function() T[#T + 1] = coroutine.running() pcall(function() ctx:delete("v1/Secret", {name = "s", namespace = "default"}) end) pcall(function() V[1] = nil end) pcall(function() V[1] = nil end)  end) end)  end) end) pcall(function() V[1] = nil end) pcall(function() (req)[("k"):rep(1) .. 0] = (V[2]).n end) pcall(function() local c <close> = nil  end) pcall(function() V[1] = nil end) pcall(function() coroutine.isyieldable(coroutine.running(), 65536) end) pcall(function() V.strong = nil end) pcall(function() luaop.sleep(0.1) end) pcall(function() luaop.sleep(0.001) end)
  end,
}
]=]

describe("the api fuzzer's findings", function()
  -- (each fails on 0f98892 and passes once its fix is in: docs/fuzzing.md)

  it("a task resuming the reconcile's thread while it waits in C does not wake it twice", function()
    replay(FINDINGS.resume)
  end)
end)
