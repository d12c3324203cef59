-- luacheck with the repository's .luacheckrc: it reports what it is there
-- for (an unknown global, an unused variable, and in an operator script
-- what the sandbox refuses), and its operators std is exactly the globals
-- lua/luaop/script/sandbox.lua gives a script. That the tree itself is clean is a
-- step of spec/run.sh of its own (build/test/luacheck.tap).
local proc = require "support.proc"
local sandbox = require "luaop.script.sandbox"

-- luacheck on `text` as if it were the file `name` of the tree (its
-- section of .luacheckrc applies): exit code, and its findings as
-- "line:column: (CODE) message" lines.
local function luacheck(name, text)
  local dir = proc.tempdir()
  finally(function() proc.sh("rm -rf " .. proc.quote(dir)) end)
  local f = assert(io.open(dir .. "/probe.lua", "w"))
  f:write(text)
  f:close()
  local code, out, err = proc.run { "luacheck", "--config", ".luacheckrc", "--codes", "--formatter", "plain",
    "--filename", name, dir .. "/probe.lua" }
  assert(code ~= nil and code < 2, ("luacheck did not check %s (exit %s):\n%s%s"):format(name, tostring(code), out, err))
  local findings = {}
  for l in out:gmatch("[^\n]+") do
    findings[#findings + 1] = assert(l:match("^" .. name:gsub("%p", "%%%0") .. ":(.*)$"), l)
  end
  return code, findings
end

-- What .luacheckrc defines, run as luacheck runs it (stds and files are
-- tables of its own, the rest of the globals Lua's).
local function luacheckrc()
  local files = setmetatable({}, { __index = function(t, k) t[k] = {}; return t[k] end })
  local env = setmetatable({ stds = {}, files = files }, { __index = _G })
  assert(loadfile(".luacheckrc", "t", env))()
  return env
end

describe("luacheck with .luacheckrc", function()
  setup(function()
    assert(proc.sh("command -v luacheck"), "luacheck is missing: hack/deps.sh test installs Debian's lua-check")
  end)

  it("reports an unknown global (W113) and an unused variable (W211) in an operator script, and exits 1", function()
    local code, findings = luacheck("operators/probe.lua", [[
local luaop = require "luaop"
local unused = 1
return luaop.controller {
  name = "probe", resource = "v1/Pod",
  reconcile = function() return no_such_global end,
}
]])
    assert.are.equal(1, code)
    assert.are.same({
      "2:7: (W211) unused variable 'unused'",
      "5:33: (W113) accessing undefined variable 'no_such_global'",
    }, findings)
  end)

  it("reports in an operator script every global the sandbox refuses, and allows them in lua/", function()
    local text = [[
io.write("x")
debug.traceback()
package.loadlib("libc.so.6", "*")
dofile("x.lua")
loadfile("x.lua")
os.getenv("HOME")
os.execute("true")
string.dump(print)
print(os.time(), os.clock(), os.date(), os.difftime(1, 0))
print(string.format("%d", 1), math.pow(2, 3), utf8.char(65), coroutine.running(), table.concat({}))
]]
    local code, findings = luacheck("operators/probe.lua", text)
    assert.are.equal(1, code)
    assert.are.same({
      "1:1: (W113) accessing undefined variable 'io'",
      "2:1: (W113) accessing undefined variable 'debug'",
      "3:1: (W113) accessing undefined variable 'package'",
      "4:1: (W113) accessing undefined variable 'dofile'",
      "5:1: (W113) accessing undefined variable 'loadfile'",
      "6:1: (W143) accessing undefined field 'getenv' of global 'os'",
      "7:1: (W143) accessing undefined field 'execute' of global 'os'",
      "8:1: (W143) accessing undefined field 'dump' of global 'string'",
    }, findings)
    -- the runtime is trusted: all of Lua 5.4, where math.pow (5.3's
    -- compatibility, which luaop's Lua keeps for scripts) is not used
    code, findings = luacheck("lua/luaop/probe.lua", (text:gsub("math%.pow%(2, 3%), ", "")))
    assert.are.same({}, findings)
    assert.are.equal(0, code)
  end)

  it("knows exactly the globals the script sandbox gives, with the fields of each library", function()
    local rc = luacheckrc()
    assert.are.equal("luaop_script", rc.files["operators"].std)
    local std = assert(rc.stds.luaop_script, "no std luaop_script").read_globals
    local function described(name, def)
      if type(def) ~= "table" then return name end
      if def.other_fields then return name .. ".*" end
      local fields = {}
      for _, f in ipairs(def.fields) do fields[#fields + 1] = f end
      table.sort(fields)
      return name .. ": " .. table.concat(fields, " ")
    end
    local told = {}
    for k, v in pairs(std) do
      if type(k) == "number" then told[#told + 1] = described(v) else told[#told + 1] = described(k, v) end
    end
    table.sort(told)
    -- what M.env() holds: each library's fields as a script's pairs() sees
    -- them, the os functions that only raise left out
    local refused = {}
    for _, k in ipairs(sandbox.OS_REFUSED) do refused[k] = true end
    local given = {}
    for k, v in pairs(sandbox.env()) do
      if k == "_G" then
        given[#given + 1] = "_G.*"
      elseif type(v) == "table" then
        local fields = {}
        for f in pairs(v) do
          if not (k == "os" and refused[f]) then fields[#fields + 1] = f end
        end
        table.sort(fields)
        given[#given + 1] = k .. ": " .. table.concat(fields, " ")
      else
        given[#given + 1] = k
      end
    end
    table.sort(given)
    assert.are.same(given, told)
    for name in pairs(sandbox.REFUSED) do assert.is_nil(std[name], name) end
  end)
end)
