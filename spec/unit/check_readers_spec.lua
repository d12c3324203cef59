-- luaop.core.check, the readers `luaop --check` is built on (src/lbind_check.c),
-- in the spec runner's own process: run plain, under ASan and under valgrind
-- (spec/unit/check_spec.lua drives luaop children, which valgrind does not
-- follow), so that a reader's out-of-bounds read shows.
describe("core.check", function()
  local check = require("luaop.core").check

  local function compile(text) return assert(load(text, "@t.lua")) end

  it("fields: each field a constructor sets, at the line of its name, grouped by constructor", function()
    local f = compile([[
local t = {
  a = 1,
  b = {
    c = "x", d = function()
    end,
  },
  e = function()
    local inner = { f = true }
    inner.g = 1
    local other = inner
    other.h = 2
    return inner
  end,
}
t.i = 3
]])
    local got = {}
    for _, x in ipairs(check.fields(f)) do got[#got + 1] = ("%s:%d:%d"):format(x.name, x.line, x.table) end
    -- d's value spans lines 4 and 5, b's 3 to 6, e's 7 to 13: each at its first;
    -- other.h is on a register no constructor filled
    assert.are.same({ "a:2:1", "c:4:2", "d:4:2", "b:3:1", "e:7:1", "i:15:1", "f:8:3", "g:9:3" }, got)
  end)

  it("uses: what is read through luaop and ctx, locals, parameters and upvalues of those names", function()
    local f = compile([[
local luaop = require "luaop"
local x = luaop.json.encode
local function r(ctx, req)
  ctx:get("v1/Pod", req)
  ctx.log:info("x")
  local kind = "v1/Secret"
  ctx:list(kind)
  ctx.seen = (ctx.seen or 0) + 1
  return function() ctx.log.level = 1; return ctx:delete("Pod"), luaop.requeue() end
end
local ctx = {}
local c = ctx
c:nope()
local l = luaop
local function s(req)
  do local ctx = req; ctx:inner() end
  do local other = req; other:nope() end
  do local a, b, ctx = 1, 2, req; b = ctx.deep end
  local x = req.y
  return x, a
end
return l.nothing, ctx.here, r, s
]])
    local got = {}
    for _, u in ipairs(check.uses(f)) do
      got[#got + 1] = ("%s %s %d %s %s%s"):format(u.root, u.path, u.line, u.method, tostring(u.arg),
        u.set and " set" or "")
    end
    assert.are.same({
      "luaop json 2 false nil", "luaop json.encode 2 false nil",
      "ctx here 22 false nil",
      "ctx get 4 true v1/Pod", "ctx log 5 false nil", "ctx log.info 5 true x", "ctx list 7 true nil",
      "ctx seen 8 false nil", "ctx seen 8 false nil set",
      "ctx log 9 false nil", "ctx log.level 9 false nil set", "ctx delete 9 true Pod", "luaop requeue 9 false nil",
      "ctx inner 16 true nil", "ctx deep 18 false nil",
    }, got)
    -- a field written through an upvalue (SETTABUP)
    f = compile("local ctx = {}\nreturn function() ctx.up = 1 end\n")
    got = {}
    for _, u in ipairs(check.uses(f)) do got[#got + 1] = ("%s %s %d %s"):format(u.root, u.path, u.line, u.set) end
    assert.are.same({ "ctx up 2 true" }, got)
  end)

  it("reads a function of many locals in time linear in its size, fields and uses alike", function()
    -- (each register was named by a scan of the function's locals from the
    -- start: 30,000 scopes took 2 s for uses, 1 s for fields, where the
    -- compiler takes 20 ms)
    local text = "local luaop = require 'luaop'\nlocal function r(ctx)\n"
      .. ("do local x = ctx.log.info end\n"):rep(30000) .. "end\nreturn r\n"
    local t = os.clock()
    local f = compile(text)
    local compiled = os.clock() - t
    t = os.clock()
    assert.are.equal(60000, #check.uses(f))
    local uses = os.clock() - t
    t = os.clock()
    check.fields(f)
    local fields = os.clock() - t
    assert.is_true(uses < 25 * compiled, ("uses took %.3f s, compiling %.3f s"):format(uses, compiled))
    assert.is_true(fields < 10 * compiled, ("fields took %.3f s, compiling %.3f s"):format(fields, compiled))
  end)

  it("clamps the lines of a binary chunk that says it starts near the largest int", function()
    -- (lines 101 and 201: deltas of 100, each under the 128 that takes an
    -- absolute line)
    local text = "local a" .. ("\n"):rep(100) .. "x = a" .. ("\n"):rep(100) .. "y = a\nreturn { f = 1 }\n"
    local dump = string.dump(compile(text))
    local at = assert(dump:find("\x87@t.lua\x80", 1, true)) + 7 -- (the main function's linedefined: 0)
    local function varint(n) -- (as ldump.c's dumpSize writes it)
      local out = string.char(0x80 | (n & 0x7f))
      n = n >> 7
      while n > 0 do out, n = string.char(n & 0x7f) .. out, n >> 7 end
      return out
    end
    local max = 2147483647 -- (lundump.c takes up to INT_MAX - 128 there)
    local crafted = assert(load(dump:sub(1, at - 1) .. varint(max - 128) .. dump:sub(at + 1), "=c", "b"))
    local lines = {}
    for _, g in ipairs(check.globals(crafted)) do lines[#lines + 1] = g.name .. " " .. g.line end
    assert.are.same({ "x " .. max - 27, "y " .. max }, lines)
    assert.are.same(max, check.fields(crafted)[1].line)
  end)

  it("entry: the kind of a path itself, a link not followed", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir .. " && touch " .. dir .. "/f && ln -s . " .. dir .. "/loop && ln -s f "
      .. dir .. "/l"))
    assert.are.equal("directory", check.entry(dir))
    assert.are.equal("file", check.entry(dir .. "/f"))
    assert.are.equal("link", check.entry(dir .. "/loop"))
    assert.are.equal("link", check.entry(dir .. "/l"))
    local none, err = check.entry(dir .. "/none")
    assert.is_nil(none)
    assert.matches("/none: No such file or directory", err)
    assert.has_error(function() check.entry() end)
    os.execute("rm -rf " .. dir)
  end)

  it("reads a chunk stripped of its debug information, or any function, without failing", function()
    local text = "local luaop = require 'luaop'\nreturn { a = luaop.x, b = function(ctx) return ctx:get('P') end }\n"
    local stripped = assert(load(string.dump(compile(text), true), "=s", "b"))
    assert.are.same({}, check.uses(stripped)) -- (no names: nothing to follow)
    for _, fn in ipairs { check.fields, check.uses, check.globals } do
      assert.are.equal("table", type(fn(stripped)))
      assert.has_error(function() fn(print) end)
      assert.has_error(function() fn(nil) end)
    end
    local deep = "return " .. ("{ a = "):rep(150) .. "1" .. (" }"):rep(150)
    assert.are.equal(150, #check.fields(compile(deep)))
    local long = "local luaop = require 'luaop'\nreturn luaop" .. (".abcdefghij"):rep(40) .. "\n"
    assert.are.equal(11, #check.uses(compile(long))) -- (a path is followed up to 120 bytes)
  end)
end)
