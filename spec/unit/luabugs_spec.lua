-- The known bugs of Lua 5.4.4 (the "Bug:" commits of Lua's own repository
-- between v5.4.4 and v5.4.8, and one more) that a script can reach, or that
-- the C core reaches through the C API. Debian bookworm's liblua5.4
-- 5.4.4-3+deb12u1 carries the fixes of CVE-2022-28805 and CVE-2022-33099
-- and no other, and eight of these crashed luaop with it (a SIGSEGV, a Lua
-- panic, heap corruption); so luaop builds Lua 5.4.7 from Debian's next
-- stable suite with the later fixes in hack/lua/ (hack/libs.sh), and these
-- specs hold that build to them. Bugs with no spec here are present in
-- 5.4.4 but out of reach (binary chunks, the debug library, hooks that
-- yield, locales, sizes no memory budget allows, lua.c) or have no effect
-- under luaop (a retried allocation never succeeds after a breach; the
-- count hook saves the pc at every instruction).
--
-- Each probe runs as a script's top level (--script), so under the sandbox
-- and the default budgets, and prints what it found. It must end in its own
-- error (luaop exits 1): a crash, a Lua panic, a hang or a sanitizer report
-- (the AddressSanitizer build, see spec/support/proc.lua) fails the spec, and
-- so does a wrong result. The expected results are those of Lua 5.4.8.
local luaop = require "support.luaop"

describe("Lua 5.4.4's known bugs", function()
  -- Run source as a script's top level: exit code, stdout, stderr.
  local function run(source, deadline)
    return luaop.run(source, { offline = true, script = true, deadline = deadline })
  end

  -- luaop exited 1 and its log names one of the messages `endings` (Lua
  -- patterns), nothing else (139: SIGSEGV, 134: abort, a Lua panic).
  local function ended(code, out, err, endings)
    local why = ("luaop exited %s\nstdout:\n%s\nstderr:\n%s"):format(tostring(code), out, err)
    assert(code == 1, why)
    assert(not err:find("PANIC", 1, true), why)
    for _, e in ipairs(endings) do
      if err:find(e) then return end
    end
    error("the script did not end as expected (" .. table.concat(endings, " | ") .. ")\n" .. why, 2)
  end

  -- Run source as a script's top level, then end it: stdout, stderr.
  local function probe(source, deadline, endings)
    local code, out, err = run(source .. '\nerror("end of probe", 0)\n', deadline)
    ended(code, out, err, endings or { "end of probe" })
    return out, err
  end

  it("survives Lua 5.4.4 bug 2db966fc: luaL_traceback needs more than 5 stack slots", function()
    -- a task that dies with its Lua stack full to the last slot: scheduler.c
    -- makes the message and traceback of its error on that stack. (Debian's
    -- liblua is not instrumented, so the writes past the stack's end go
    -- unseen here; what is seen is that the error's text is lost.)
    local code, out, err = run([==[
local codepoint, sub = utf8.codepoint, string.sub
local base = ("a"):rep(1000000) .. "\xff"
local function try(n, direct)
  local s = sub(base, -(n + 1)) -- n values to push, then an invalid byte
  if direct then
    local x = codepoint(s, 1, -1) -- one stack slot lower than under pcall
  else
    local ok, e = pcall(codepoint, s, 1, -1)
    return e
  end
end
-- the most values that fit under pcall
local lo, hi = 1, 1000000
while lo < hi do
  local mid = (lo + hi + 1) // 2
  if try(mid) == "invalid UTF-8 code" then lo = mid else hi = mid - 1 end
end
print("fits=" .. lo)
-- no finalizer left (one would grow the stack) and a small stack, so that
-- the stack grows to just what codepoint asks for
collectgarbage(); collectgarbage()
try(lo + 1, true)
]==])
    assert.matches("fits=%d+", out, nil, false, err)
    ended(code, out, err, { "invalid UTF%-8 code\\nstack traceback:" })
  end)

  it("survives Lua 5.4.4 bug 25da574f: luaD_seterrorobj should not raise errors", function()
    -- a coroutine dead of LUA_ERRERR, closed once the memory budget is
    -- breached: making its "error in error handling" fails outside any
    -- protected call, which panics
    local out = probe([==[
local resume, create, yield, close = coroutine.resume, coroutine.create, coroutine.yield, coroutine.close
local pack, unpack, rep, find = table.pack, table.unpack, string.rep, string.find
local t = setmetatable({}, { __tostring = tostring }) -- nested C calls only
local function nest(k, co)
  if k == 0 then local a, b = resume(co) return a, b end
  local r = pack(pcall(nest, k - 1, co))
  if not r[1] then return false, r[2] end
  return unpack(r, 2, r.n)
end
-- resumed from 199 nested C calls, a coroutine passes the check at 200 and
-- dies of LUA_ERRERR at 220 (the message's text is no constant here, so
-- that it is collected)
local function dead_of_errerr()
  for k = 1, 250 do
    local co = create(function() yield() return tostring(t) end)
    resume(co)
    local _, msg = nest(k, co)
    if type(msg) == "string" and find(msg, "^error in error") then return co end
  end
end
local victim = dead_of_errerr()
print("victim=" .. tostring(victim ~= nil))
collectgarbage()
-- in a coroutine of its own, so that the hook does not fire in between
local ok, closed = resume(create(function()
  pcall(rep, "x", 1 << 30) -- over the budget: every growth fails now
  return (close(victim))
end))
print("close=" .. tostring(ok) .. "," .. tostring(closed))
]==], nil, { "end of probe", "memory budget of %d+ bytes exceeded" })
    assert.matches("victim=true", out)
  end)

  it("survives Lua 5.4.4 bug 3fe7be95: message handler can be overwritten", function()
    -- closing a coroutine that yielded inside xpcall runs its __close with
    -- that xpcall's handler: the __close's own locals overwrite it, or a
    -- collection shrinks the stack below it first
    local out = probe([==[
local co = coroutine.create(function()
  local clo <close> = setmetatable({}, { __close = function() local x = 134 error(x) end })
  xpcall(coroutine.yield, function() return "XXX" end)
end)
assert(coroutine.resume(co))
local st, msg = coroutine.close(co)
print("close=" .. tostring(st) .. "," .. tostring(msg))
co = coroutine.create(function()
  local clo <close> = setmetatable({}, { __close = function()
    collectgarbage()
    error("in close", 0)
  end })
  local function deep(n)
    if n == 0 then return xpcall(coroutine.yield, function() return "handler" end) end
    local r = deep(n - 1)
    return r
  end
  deep(30000)
end)
assert(coroutine.resume(co))
st, msg = coroutine.close(co)
print("close=" .. tostring(st) .. "," .. tostring(msg))
]==])
    assert.matches("close=false,134\nclose=false,in close\n", out)
  end)

  it("survives Lua 5.4.4 bug 782ef85b: wrong code generation for indices with comparisons", function()
    local out = probe([==[
_ENV[true] = 10
local function aux() return _ENV[1 < 2] end
print("index=" .. tostring(select(2, pcall(aux))))
_ENV[true] = nil
]==])
    assert.matches("index=10\n", out)
  end)

  it("survives Lua 5.4.4 bug 7923dbbf: recursion in getobjname can overflow the C stack", function()
    -- naming the culprit of an error walks a chain of field accesses with
    -- one C call per access (and a scan of the code before each): a
    -- hundred thousand of them overflow the C stack after seconds in C,
    -- where neither budget nor the watchdog's interrupt reach
    local out = probe([==[
local t = {}
t.x = t
local f = assert(load("local t = ...; return t" .. (".x"):rep(100000) .. ".y()"))
print("chain=" .. tostring(select(2, pcall(f, t))))
]==], 30)
    assert.matches("chain=.-attempt to call a nil value %(field 'y'%)", out)
  end)

  it("survives Lua 5.4.4 bug 1e64c139: stack overflow with nesting of coroutine.close", function()
    -- each coroutine, when closed, closes the previous one: C recursion that
    -- nothing counts
    local out = probe([==[
local coro = false
for i = 1, 30000 do
  local previous = coro
  coro = coroutine.create(function()
    local cc <close> = setmetatable({}, { __close = function()
      if previous then assert(coroutine.close(previous)) end
    end })
    coroutine.yield()
  end)
  assert(coroutine.resume(coro))
end
print("close=" .. tostring((coroutine.close(coro))))
]==])
    assert.matches("close=false", out)
  end)

  it("survives Lua 5.4.4 bug 196bb94d: lua_settop may use an invalid pointer to stack", function()
    -- a variable left on the to-be-closed list (bug 997f11f5) is closed by
    -- the next C function that pops below it (print's lua_pop); its __close
    -- moves the stack, and lua_settop then sets the top into the old one
    local out = probe([==[
local function grow(n) if n > 0 then return 1 + grow(n - 1) end return 0 end
local o = setmetatable({}, { __close = function() grow(20000) end })
local function other() return 1 end
local function left()
  for k, v in next, {}, nil, o do
    local function f() return k end
    break
  end
  return other()
end
local function deep(n) if n == 0 then return left() end local r = deep(n - 1) return r end
deep(10)
print("settop", "a", "b")
]==])
    assert.matches("settop\ta\tb\n", out)
  end)

  it("survives Lua 5.4.4 bug 997f11f5: break may not properly close a variable in a for loop", function()
    -- the loop's closing value stays on the to-be-closed list; after a tail
    -- call the next <close> below it walks that list off the stack
    local out = probe([==[
local closed = false
local o = setmetatable({}, { __close = function() closed = true end })
local function test()
  for k, v in next, {}, nil, o do
    local function f() return k end -- an upvalue
    break
  end
  return closed
end
print("closed=" .. tostring(test()))
local function other() return 1 end
local function left()
  for k, v in next, {}, nil, o do
    local function f() return k end
    break
  end
  return other()
end
local function deep(n) if n == 0 then return left() end local r = deep(n - 1) return r end
deep(10)
do local x <close> = o end
print("tail-call=survived")
]==])
    assert.matches("closed=true\ntail%-call=survived\n", out)
  end)

  it("survives Lua 5.4.4 bug c764ca71: wrong code generation in bitwise operations", function()
    local out = probe([==[
local code = { "local x = {" }
for i = 1, 257 do code[#code + 1] = i .. ".1," end -- more than 256 constants
code[#code + 1] = "};"
code = table.concat(code)
local r = {}
for _, e in ipairs { "1 ~ (2 or 3)", "1 | (2 or 3)", "1 + (2 or 3)", "1 << (2 or 3)" } do
  r[#r + 1] = tostring(load(code .. "return " .. e)())
end
print("bitwise=" .. table.concat(r, ","))
]==])
    assert.matches("bitwise=3,3,3,4\n", out)
  end)

  it("survives Lua 5.4.4 bug a1089b41: utf8.codes accepts spurious continuation bytes", function()
    local out = probe([==[
local r = {}
for _, s in ipairs { "in\x80valid", "\xbfinvalid", "hel\xBFlo" } do
  r[#r + 1] = tostring((pcall(function() for _ in utf8.codes(s) do end end)))
end
print("codes=" .. table.concat(r, ","))
]==])
    assert.matches("codes=false,false,false\n", out)
  end)

  it("survives Lua 5.4.4 bug d1ee2a4d: bad error message with fields of a string _ENV", function()
    local out = probe([==[
print("message=" .. select(2, pcall(load("return ('_ENV').x + 1"))))
]==])
    assert.matches("message=.-%(field 'x'%)\n", out)
  end)

  it("survives Lua 5.4.4 bug 5ab6a575: wrong line number for function calls", function()
    local out = probe([==[
local _, e1 = pcall(load("a\n(\n23)\n", "=c1"))
local _, e2 = pcall(load("local a = {x = 13}\na\n.\nx\n(\n23\n)\n", "=c2"))
print("lines=" .. e1:match("^c1:(%d+):") .. "," .. e2:match("^c2:(%d+):"))
]==])
    assert.matches("lines=2,5\n", out)
  end)

  it("survives Lua 5.4.4 commit 603b2c64 (in Debian's CVE-2022-33099 patch): "
    .. "luaV_concat can use an invalidated pointer to stack", function()
    -- not a "Bug:" commit upstream (its bug came with the CVE fix, after
    -- 5.4.4), but Debian's backport of that fix brings it: a __concat that
    -- moves the stack in a concatenation of three or more values
    local out = probe([==[
local function grow(n) if n > 0 then return 1 + grow(n - 1) end return 0 end
local o = setmetatable({}, { __concat = function(a, b) grow(20000) return "x" end })
local function f() local s = "a" .. "b" .. o .. "c" return s end
print("concat=" .. f())
]==])
    assert.matches("concat=abx\n", out)
  end)
end)
