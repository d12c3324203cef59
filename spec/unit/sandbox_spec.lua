-- What a luaop script (--script: a file or a directory, what a ConfigMap
-- delivers) can reach: an allowlist, compared in full with everything a
-- script can walk to, so anything added later fails here until reviewed;
-- and no way to a file, the environment or a credential, nor to what
-- another script sees. Each probe runs at a script's top level and ends
-- with an error, so luaop prints what it found and exits 1.
local luaop = require "support.luaop"
local volume = require "support.volume"

-- Everything a script reaches from its globals, from require "luaop" and
-- through getmetatable, as "path type" lines (a walk of the probe itself).
local ALLOWED = [[
(a string) string
_G table
_G._VERSION string
_G.assert function
_G.collectgarbage function
_G.coroutine table
_G.coroutine.close function
_G.coroutine.create function
_G.coroutine.isyieldable function
_G.coroutine.resume function
_G.coroutine.running function
_G.coroutine.status function
_G.coroutine.wrap function
_G.coroutine.yield function
_G.coroutine<metatable> boolean
_G.error function
_G.getmetatable function
_G.ipairs function
_G.load function
_G.math table
_G.math.abs function
_G.math.acos function
_G.math.asin function
_G.math.atan function
_G.math.atan2 function
_G.math.ceil function
_G.math.cos function
_G.math.cosh function
_G.math.deg function
_G.math.exp function
_G.math.floor function
_G.math.fmod function
_G.math.frexp function
_G.math.huge number
_G.math.ldexp function
_G.math.log function
_G.math.log10 function
_G.math.max function
_G.math.maxinteger number
_G.math.min function
_G.math.mininteger number
_G.math.modf function
_G.math.pi number
_G.math.pow function
_G.math.rad function
_G.math.random function
_G.math.randomseed function
_G.math.sin function
_G.math.sinh function
_G.math.sqrt function
_G.math.tan function
_G.math.tanh function
_G.math.tointeger function
_G.math.type function
_G.math.ult function
_G.math<metatable> boolean
_G.next function
_G.os table
_G.os.clock function
_G.os.date function
_G.os.difftime function
_G.os.execute function
_G.os.exit function
_G.os.getenv function
_G.os.remove function
_G.os.rename function
_G.os.setlocale function
_G.os.time function
_G.os.tmpname function
_G.os<metatable> boolean
_G.pairs function
_G.pcall function
_G.print function
_G.rawequal function
_G.rawget function
_G.rawlen function
_G.rawset function
_G.require function
_G.select function
_G.setmetatable function
_G.string table
_G.string.byte function
_G.string.char function
_G.string.find function
_G.string.format function
_G.string.gmatch function
_G.string.gsub function
_G.string.len function
_G.string.lower function
_G.string.match function
_G.string.pack function
_G.string.packsize function
_G.string.rep function
_G.string.reverse function
_G.string.sub function
_G.string.unpack function
_G.string.upper function
_G.string<metatable> boolean
_G.table table
_G.table.concat function
_G.table.insert function
_G.table.move function
_G.table.pack function
_G.table.remove function
_G.table.sort function
_G.table.unpack function
_G.table<metatable> boolean
_G.tonumber function
_G.tostring function
_G.type function
_G.utf8 table
_G.utf8.char function
_G.utf8.charpattern string
_G.utf8.codepoint function
_G.utf8.codes function
_G.utf8.len function
_G.utf8.offset function
_G.utf8<metatable> boolean
_G.xpcall function
luaop table
luaop.array function
luaop.client function
luaop.conditions table
luaop.conditions.get function
luaop.conditions.is_false function
luaop.conditions.is_true function
luaop.conditions.remove function
luaop.conditions.set function
luaop.conditions<metatable> boolean
luaop.controller function
luaop.controller_of function
luaop.copy function
luaop.hash function
luaop.is_error function
luaop.json table
luaop.json.array function
luaop.json.cut function
luaop.json.decode function
luaop.json.decode_page function
luaop.json.encode function
luaop.json.event function
luaop.json.hash function
luaop.json.is_array function
luaop.json.null userdata
luaop.json.page_texts function
luaop.json.peek function
luaop.json.trim function
luaop.json<metatable> boolean
luaop.log table
luaop.log.name string
luaop.log.values table
luaop.log.values<metatable> boolean
luaop.log<metatable> boolean
luaop.logger function
luaop.metrics table
luaop.metrics.counter function
luaop.metrics.gauge function
luaop.metrics.histogram function
luaop.metrics<metatable> boolean
luaop.null userdata
luaop.requeue function
luaop.requeue_after function
luaop.set_controller function
luaop.sleep function
luaop.spawn function
luaop.terminal function
luaop.time table
luaop.time.format function
luaop.time.format_micro function
luaop.time.monotonic function
luaop.time.parse function
luaop.time.wall function
luaop.time<metatable> boolean
luaop.version string
luaop.webhook table
luaop.webhook.conversion function
luaop.webhook.mutating function
luaop.webhook.validating function
luaop.webhook<metatable> boolean
luaop<metatable> boolean
]]

-- Never in the allowlist, whatever is added to it.
local NEVER = { "^_G%.io[ .]", "^_G%.debug[ .]", "^_G%.package[ .]", "^_G%.dofile ", "^_G%.loadfile ",
  "^_G%.string%.dump ", "%.loadlib ", "^luaop%.core" }

describe("the script sandbox", function()
  -- Run source as a script's top level, then end it: stdout, stderr.
  local function probe(source)
    local code, out, err = luaop.run(source .. '\nerror("end of probe", 0)\n', { offline = true, script = true })
    assert.are.equal(1, code, err)
    return out, err
  end

  it("lets a script reach exactly what its allowlist holds, and never io, debug, package, string.dump or C code", function()
    local out, err = probe([[
      local seen, paths = {}, {}
      local function walk(v, path)
        if type(v) ~= "table" then paths[#paths + 1] = path .. " " .. type(v) end
        if type(v) == "table" then
          if seen[v] then return end
          seen[v] = true
          paths[#paths + 1] = path .. " table"
          for k, x in pairs(v) do walk(x, path .. "." .. tostring(k)) end
        end
        local mt = getmetatable(v)
        if mt ~= nil then walk(mt, path .. "<metatable>") end
      end
      walk(_G, "_G")
      walk("", "(a string)")
      walk(require("luaop"), "luaop")
      table.sort(paths)
      print(table.concat(paths, "\n"))
    ]])
    assert.matches("end of probe", err)
    assert.are.equal(ALLOWED, out)
    for line in ALLOWED:gmatch("[^\n]+") do
      for _, never in ipairs(NEVER) do assert.is_nil(line:find(never), line) end
    end
  end)

  for _, case in ipairs {
    { 'io.open("/etc/hostname")', "io is not available to luaop scripts" },
    { 'os.execute("true")', "os.execute is not available to luaop scripts" },
    { "os.exit(0)", "os.exit is not available to luaop scripts" },
    { 'os.getenv("HOME")', "os.getenv is not available to luaop scripts" },
    { 'os.remove("/tmp/x")', "os.remove is not available to luaop scripts" },
    { 'os.rename("/tmp/x", "/tmp/y")', "os.rename is not available to luaop scripts" },
    { "debug.getinfo(1)", "debug is not available to luaop scripts" },
    { 'package.loadlib("libc.so.6", "*")', "package is not available to luaop scripts" },
    { 'dofile("/etc/hostname")', "dofile is not available to luaop scripts" },
    { 'loadfile("/etc/hostname")', "loadfile is not available to luaop scripts" },
    { 'require("luaop.core")', "module luaop.core is not available to luaop scripts" },
    { 'require("debug")', "module debug is not available to luaop scripts" },
    { 'require("io")', "module io is not available to luaop scripts" },
    { 'require("lfs")', "module lfs is not available to luaop scripts" },
    { '("").dump(print)', "string.dump is not available to luaop scripts" },
    { 'load("\\27Lua\\84\\0", "x", "b")', "binary chunks are not available to luaop scripts" },
    { 'assert(load("\\27Lua\\84\\0"))', "attempt to load a binary chunk" },
    { 'collectgarbage("stop")', "collectgarbage option stop is not available to luaop scripts" },
    { 'collectgarbage("generational")', "collectgarbage option generational is not available to luaop scripts" },
    { "os.tmpname()", "os.tmpname is not available to luaop scripts" },
    { 'os.setlocale("C")', "os.setlocale is not available to luaop scripts" },
    { 'collectgarbage("incremental")', "collectgarbage option incremental is not available to luaop scripts" },
    { 'collectgarbage("setpause", 100)', "collectgarbage option setpause is not available to luaop scripts" },
    { 'collectgarbage("setstepmul", 100)', "collectgarbage option setstepmul is not available to luaop scripts" },
    { 'collectgarbage("restart")', "collectgarbage option restart is not available to luaop scripts" },
    { 'setmetatable({}, { __gc = function() end })', "__gc metamethods are not available to luaop scripts" },
  } do
    it("refuses " .. case[1] .. " with a message that says so", function()
      local _, err = probe(case[1])
      assert.matches(case[2], err, 1, true)
      assert.is_nil(err:find("end of probe", 1, true))
    end)
  end

  it("cannot read the kubeconfig, the service account token or the client key", function()
    local out = probe([[
      local function try(what, f) print(what, pcall(f)) end
      try("io", function() return io.open(arg and arg[0] or "/etc/hostname") end)
      try("core", function() return require("luaop.core").fs.read end)
      try("client", function()
        local c = require("luaop").client()
        local found = {}
        for k, v in pairs(c) do found[#found + 1] = k .. "=" .. tostring(v) end
        return table.concat(found, ",")
      end)
      try("metatable", function() return getmetatable(require("luaop").client()) end)
      try("string metatable", function() return getmetatable("").__index end)
    ]])
    assert.matches("io\tfalse\t[^\n]*io is not available", out)
    assert.matches("core\tfalse\t[^\n]*module luaop.core is not available", out)
    assert.matches("client\ttrue\t\n", out) -- a view of its own: nothing in it
    assert.matches("metatable\ttrue\tfalse\n", out)
    assert.matches("string metatable\tfalse\t[^\n]*attempt to index a nil value", out)
  end)

  it("still loads text into the script's own environment, and runs it", function()
    local out = probe([[
      mine = "the script's"
      print(load("return 1 + 1")())
      print(load("return ...", "chunk", "t", {})(7))
      print(load("return mine")())
      print(os.time() > 0, type(os.date("!%Y")), collectgarbage("count") > 0)
      local mt = {}
      print(getmetatable(setmetatable({}, mt)) == mt)
    ]])
    assert.matches("^2\n7\nthe script's\ntrue\tstring\ttrue\ntrue\n", out)
  end)

  it("keeps each script's changes to shared things from every other script", function()
    -- a.lua (loaded first) tries everything that used to leak; b.lua reports
    local v = volume.new { ["a.lua"] = [[
      local luaop, print = require "luaop", print
      local tried = {}
      local function try(what, f) tried[#tried + 1] = what .. "=" .. tostring((pcall(f))) end
      try("global", function() shared_global = "a's" end)
      try("_G", function() _G.print = nil end)
      try("string.upper", function() string.upper = function() return "hacked" end end)
      try("rawset string", function() rawset(string, "upper", function() return "hacked" end) end)
      try("string metatable", function() getmetatable("").__index.upper = function() return "hacked" end end)
      try("luaop.requeue_after", function() luaop.requeue_after = function() return "intercepted" end end)
      try("luaop.time.parse", function() luaop.time.parse = nil end)
      try("controller defaults", function() require("luaop.definition").DEFAULT_INSTRUCTIONS = 1e15 end)
      try("client", function() luaop.client().namespace = "a's" end)
      print("a tried", table.concat(tried, " "))
      return luaop.controller { name = "a", resource = "v1/ConfigMap", namespace = "x", reconcile = function() end }
    ]], ["b.lua"] = [[
      local luaop = require "luaop"
      print("b sees", tostring(shared_global), type(print), ("x"):upper(), string.upper("y"),
        luaop.requeue_after(1) ~= "intercepted", type(luaop.time.parse), luaop.client().namespace)
      error("end of probe", 0)
    ]] }
    finally(function() v:remove() end)
    local code, out, err = luaop.run(nil, { offline = true, flags = { "--script", v.dir } })
    assert.are.equal(1, code, err)
    assert.matches("a tried\tglobal=true _G=true string.upper=false rawset string=false string metatable=false " ..
      "luaop.requeue_after=false luaop.time.parse=false controller defaults=false client=true", out)
    assert.matches("b sees\tnil\tfunction\tX\tY\ttrue\tfunction\tdefault", out)
  end)

  it("survives what Lua 5.4.4's known bugs need: _ENV <const>, a C stack overflow while handling an error, deep coroutines", function()
    -- Debian's 5.4.4 carries the fixes of CVE-2022-28805 and CVE-2022-33099;
    -- the rest a script can try must end in an error, never a crash
    local out, err = probe([==[
]==] .. [==[local luaop = require "luaop"
local out = {}
-- CVE-2022-28805: wrong code when _ENV is <const>
local ok, r = pcall(load, "local _ENV <const> = {x = 42}; return x")
out[#out+1] = "env-const=" .. tostring(ok and r and r())
-- CVE-2022-33099: C stack overflows while handling an error
local function loop() assert(pcall(loop)) end
out[#out+1] = "error-overflow=" .. tostring((xpcall(loop, loop)))
-- deep nesting of coroutines
local function nest(n) if n == 0 then return 0 end return coroutine.wrap(nest)(n - 1) + 1 end
out[#out+1] = "coroutines=" .. tostring((pcall(nest, 100000)))
-- deep nesting of coroutine.close
local co
local function deep(n) if n == 0 then return end local c = coroutine.create(deep); coroutine.resume(c, n - 1); coroutine.close(c) end
out[#out+1] = "close=" .. tostring((pcall(deep, 100000)))
-- break out of a loop with a to-be-closed variable
local closed = 0
for i = 1, 3 do
  local x <close> = setmetatable({}, { __close = function() closed = closed + 1 end })
  if i == 2 then break end
end
out[#out+1] = "tbc-break=" .. closed
-- deep recursion of string.gsub callbacks
local function g(s) return (s:gsub(".", g)) end
out[#out+1] = "gsub-recursion=" .. tostring((pcall(g, "ab")))
print(table.concat(out, " "))
]==])
    assert.matches("env%-const=42 error%-overflow=false coroutines=false close=%a+ tbc%-break=2 " ..
      "gsub%-recursion=false", out, err)
    -- deep recursion of Lua calls, in a probe of its own: to the edge of
    -- Lua's stack takes 0.1 to 0.4 s of CPU (200,000 frames, each a
    -- CallInfo allocated, then unwound) that the CPU meter charges beyond
    -- its million instructions, so that on a loaded machine it may end at
    -- the top level's budget (10^8) instead of in the stack overflow: an
    -- error either way, at the script's line, never a crash
    out, err = probe([==[
local function rec(n) return n == 0 and 0 or rec(n - 1) + 1 end
print("recursion=" .. tostring((pcall(rec, 1e7))))
]==])
    if not out:find("recursion=false", 1, true) then
      assert.matches("%.lua:[12]: instruction budget of 100000000 exceeded", err)
    end
  end)

  it("never logs credentials written into the server URL", function()
    local path = luaop.offline_kubeconfig("http://alice:pw-s3cret@127.0.0.1:1")
    local code, out, err = luaop.run("return 0", { kubeconfig = path, flags = { "-v", "10" } })
    os.remove(path)
    assert.are.equal(0, code, err)
    assert.matches("using Kubernetes configuration", err)
    assert.is_nil((out .. err):find("pw-s3cret", 1, true))
  end)
end)
