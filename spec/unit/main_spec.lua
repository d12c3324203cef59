-- luaop.main: how luaop runs what it is given. A --program runs top to
-- bottom with the arguments after --, its return value the exit status;
-- one that raises ends with 1 and its traceback; --check goes to
-- luaop.check. (Scripts, reloads and the manager: script_spec,
-- manager_spec.)
local luaop = require "support.luaop"

describe("luaop.main", function()
  it("runs a program with the arguments after --, its return value the exit status", function()
    local code, out = luaop.run([[
      local a, b = ...
      print("args", a, b, select("#", ...))
      return 7
    ]], { offline = true, args = { "one", "two words" } })
    assert.are.equal(7, code)
    assert.matches("args\tone\ttwo words\t2", out)
  end)

  it("exits 0 when a program returns nothing", function()
    assert.are.equal(0, (luaop.run("print('done')", { offline = true })))
  end)

  it("ends a program that raises with status 1, logging the error with its file, line and traceback", function()
    local code, _, err = luaop.run([[
      local function inner() error("went wrong") end
      inner()
    ]], { offline = true })
    assert.are.equal(1, code)
    assert.matches("program failed", err)
    assert.matches(":1: went wrong", err)
    assert.matches("stack traceback", err)
  end)

  it("gives a program lua-cjson's interface as require 'cjson' and 'cjson.safe'", function()
    local out = luaop.ok([[
      local cjson, safe = require "cjson", require "cjson.safe"
      print(cjson.encode { a = 1 }, safe.decode("{") == nil)
    ]], { offline = true })
    assert.matches('{"a":1}\ttrue', out)
  end)

  it("checks scripts with --check and no cluster", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    finally(function() os.execute("rm -rf " .. dir) end)
    local f = assert(io.open(dir .. "/typo.lua", "w"))
    f:write("local luaop = require 'luaop'\nreturn luaop.controler { name = 'x' }\n")
    f:close()
    local code, out, err = luaop.run(nil, { kubeconfig = false, flags = { "--check", dir .. "/typo.lua" } })
    assert.are.equal(1, code, out .. err)
    assert.matches("typo%.lua:2:", out .. err)
  end)
end)
