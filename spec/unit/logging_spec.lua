-- luaop.logging: loggers over the core's log (luaop.logger, luaop.log, and
-- every internal module's), as luaop writes them.
local luaop = require "support.luaop"
local logging = require "luaop.logging"

describe("luaop.logging", function()
  it("writes each level with the logger's name, its values and the call's, the call's winning", function()
    local _, err = luaop.ok([[
      local log = require("luaop.logging").logger("shop"):with { region = "eu", n = 1 }
      log:info("opened", { n = 2 })
      log:error("failed", { why = "x" })
      log:with({ door = "back" }):info("knocked")
      require("luaop").log:info("from a script's default logger")
    ]], { offline = true })
    assert.matches('\tINFO\tshop\topened\t{"n": 2, "region": "eu"}\n', err)
    assert.matches('\tERROR\tshop\tfailed\t{"n": 1, "region": "eu", "why": "x"}\n', err)
    assert.matches('\tINFO\tshop\tknocked\t{"door": "back", "n": 1, "region": "eu"}\n', err)
    assert.matches("\tINFO\tscript\tfrom a script's default logger\n", err)
  end)

  it("writes debug lines only at -v 1 and above", function()
    local program = [[require("luaop.logging").logger("d"):debug("fine detail")]]
    local _, quiet = luaop.ok(program, { offline = true })
    local _, verbose = luaop.ok(program, { offline = true, flags = { "-v", "1" } })
    assert.is_nil(quiet:find("fine detail", 1, true))
    assert.matches("\tDEBUG\td\tfine detail", verbose)
  end)

  it("gives every logger one sealed metatable: indexing yields a method, never a table of luaop's", function()
    local a, b = logging.logger("a"), logging.logger("b"):with { k = "v" }
    assert.are.equal(getmetatable(a), getmetatable(b))
    assert.is_false(getmetatable(a)) -- __metatable = false
    for _, m in ipairs { "info", "error", "debug", "with" } do assert.are.equal("function", type(a[m])) end
    assert.is_nil(a.__index)
    assert.are.equal("a", a.name)
    assert.are.same({}, a.values)
    assert.are.same({ k = "v" }, b.values)
  end)
end)
