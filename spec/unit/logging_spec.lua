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

  -- issue 31's trial: fields as a string, a list, or a dot for a colon
  -- raised inside luaop.logging (or in the core's write on a cluster)
  it("raises misuse at the caller's line, saying what is wrong", function()
    local log = logging.logger("t")
    local function raised(f)
      local ok, err = pcall(f)
      assert.is_false(ok)
      return err
    end
    local line = debug.getinfo(1, "l").currentline
    local errs = {
      raised(function() log:info("msg", "fields as a string") end),
      raised(function() log.info("msg", { a = 1 }) end),
      raised(function() log:error({ a = 1 }) end),
      raised(function() log:debug("msg", { "a list" }) end),
      raised(function() local _ = log:with("k=v") end),
      raised(function() log.with({ k = "v" }) end),
    }
    local want = {
      'log:info%(msg %[, fields%]%): fields must be a table {key = value, ...}, got the string "fields as a string"$',
      "log:info is a method: call it with a colon %(ctx%.log:info%(%.%.%.%)%)$",
      "log:error%(msg %[, fields%]%): msg must be a string, got a table$",
      "log:debug%(msg %[, fields%]%): fields must be a table {key = value, ...} with string keys, got the key 1$",
      'log:with%(fields%): fields must be a table {key = value, ...}, got the string "k=v"$',
      "log:with is a method: call it with a colon %(ctx%.log:with%(%.%.%.%)%)$",
    }
    for i, err in ipairs(errs) do
      assert.matches("^spec/unit/logging_spec%.lua:" .. (line + 1 + i) .. ": " .. want[i], err)
    end
  end)
end)
