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

-- The first lines of every program the grammar makes (its prelude's
-- helpers; later grammars added more after them)
local HEAD = [=[
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
]=]

-- 0f98892-resume-task-thread-found-by-fuzzing: a task spawned after the
-- reconcile's request resumes the reconcile's thread (T[1]) while it
-- waits; the reconcile then sleeps twice: one wake-up too many, and the
-- scheduler resumes a task it had freed (sched_step, heap-use-after-free;
-- SIGSEGV in the release build).
FINDINGS.resume = HEAD .. [=[
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

-- 0f98892-log-values-found-by-fuzzing: the script extends ctx.log's values
-- (FILLED) with two fields whose keys it made at run time, one of them a
-- hostile value holding a function (no JSON can); ctx.log:error("app=x")
-- writes those values: JSON fails, so the log writes the value's
-- __tostring, which empties every table the program holds (the values
-- among them) and collects; the key of the field read before it is freed,
-- and the log's key sort reads it (lbind_log_keycmp, heap-use-after-free).
FINDINGS.log = HEAD .. [=[
local CTX
-- a value hostile under any use: every metamethod is f; holding a function, as no JSON can
local MMS = { '__index', '__newindex', '__tostring', '__eq', '__lt', '__le', '__len', '__close', '__concat',
  '__pairs', '__call', '__add', '__sub', '__mul', '__div', '__mod', '__pow', '__unm', '__idiv', '__band',
  '__bor', '__bxor', '__shl', '__shr', '__bnot' }
-- (three deep at most: its function runs into its own metamethods, each doing it again)
local function HV(f, kind)
  local mt, depth = { __name = 'HV' }, 0
  local function g(...)
    if depth >= 3 then return 'k' end
    depth = depth + 1
    local r = table.pack(pcall(f, ...))
    depth = depth - 1
    if not r[1] then error(r[2], 0) end
    return table.unpack(r, 2, r.n)
  end
  for _, m in ipairs(MMS) do mt[m] = g end
  return setmetatable(kind == 0 and { print } or { a = { print } }, mt)
end
-- empty every table the program holds (its slots and what the API handed it, deepest first), then
-- collect: what a callback does to the call it runs in
-- h, its values table extended by t's entries (a handle the API handed out, changed by the script)
local function FILLED(h, t)
  pcall(function() for k, v in next, t do h.values[k] = v end end)
  return h
end
-- (not again from inside itself: a metamethod it runs into would start it again, and again)
local emptying = false
local function EMPTY()
  if emptying then return end
  emptying = true
  local seen = {}
  local function clr(t, d)
    if type(t) ~= 'table' or seen[t] or d > 3 then return end
    seen[t] = true
    for _, v in next, t do clr(v, d + 1) end
    for k in next, t do pcall(rawset, t, k, nil) end
  end
  pcall(clr, V, 0)
  if CTX then pcall(function() clr(CTX.log.values, 0) end) end
  pcall(collectgarbage, 'collect')
  emptying = false
end
return luaop.controller {
  name = 'fz', resource = 'v1/ConfigMap',
  reconcile = function(ctx, req)
    if ONCE then return end
    ONCE = true
    T[1] = coroutine.running()
    CTX = ctx
    pcall(function() V[1] = nil end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() FILLED(ctx.log, {[("k"):rep(2) .. 101] = {log = {log = 0.5, }, }, [("k"):rep(3) .. 101] = HV(function(...) local A = {...} pcall(EMPTY) pcall(function() EMPTY() end)  return ("k"):rep(3) .. 101 end, 1), }):error("app=x") end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() V[3] = "i4" end) pcall(function() V[1] = ctx.log:with({}) end) pcall(function() V[2] = {log = {log = true, }, } end) pcall(function() V[1] = FILLED(ctx.log, {[("k"):rep(2) .. 101] = {namespace = {log = V[2], }, }, [("k"):rep(2) .. 101] = {log = {log = V[2], }, }, }):with({[("k"):rep(2) .. 101] = {log = {n = V[2], }, }, [("k"):rep(2) .. 101] = {}, }) end) pcall(function() luaop.sleep(0) end) pcall(function() luaop.logger("fz"):error("count") end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() V[2] = "i4" end) pcall(function() luaop.logger("fz"):with({}):info("") end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(10) end) pcall(function() luaop.sleep(0) end) pcall(function() V[1] = nil end)
  end,
}
]=]

describe("the api fuzzer's findings", function()
  -- (each fails on 0f98892 and passes once its fix is in: docs/fuzzing.md)

  it("a task resuming the reconcile's thread while it waits in C does not wake it twice", function()
    replay(FINDINGS.resume)
  end)

  it("a log value's __tostring that empties the values being written and collects frees no key the log still reads", function()
    replay(FINDINGS.log)
  end)
end)
