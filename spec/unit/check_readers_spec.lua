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
  return function() return ctx:delete("Pod"), luaop.requeue() end
end
local ctx = {}
local c = ctx
c:nope()
local l = luaop
return l.nothing, ctx.here, r
]])
    local got = {}
    for _, u in ipairs(check.uses(f)) do
      got[#got + 1] = ("%s %s %d %s %s"):format(u.root, u.path, u.line, u.method, tostring(u.arg))
    end
    assert.are.same({
      "luaop json 2 false nil", "luaop json.encode 2 false nil",
      "ctx here 14 false nil",
      "ctx get 4 true v1/Pod", "ctx log 5 false nil", "ctx log.info 5 true x", "ctx list 7 true nil",
      "ctx delete 8 true Pod", "luaop requeue 8 false nil",
    }, got)
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
