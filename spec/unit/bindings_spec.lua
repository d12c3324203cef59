-- The rules every C binding follows (docs/security.md, "Rules for C
-- bindings"): no pointer into a Lua object kept across a call that can run
-- Lua or the collector unless the object is anchored; no script metamethod
-- run from C; every buffer grown for a script freed on every error path and
-- charged to its budget. The cases below broke a rule each (found by an
-- adversarial review, confirmed under ASan); the table of bindings in
-- docs/security.md is checked against the source.
local luaop = require "support.luaop"

-- every src/ file that touches a lua_State: includes lua.h, lauxlib.h or
-- lualib.h, or Lua's own internals, or names lua_State
local function lua_files()
  local files = {}
  local ls = assert(io.popen("ls src"))
  for name in ls:lines() do
    local f = assert(io.open("src/" .. name))
    local text = f:read("a")
    f:close()
    if text:find('#include%s*[<"]lua%.h[>"]') or text:find('#include%s*[<"]lauxlib%.h[>"]')
      or text:find('#include%s*[<"]lualib%.h[>"]') or text:find('#include%s*"lstate%.h"')
      or text:find("lua_State", 1, true) then
      files[name] = true
    end
  end
  ls:close()
  return files
end

-- the files named in the first column of the table of bindings
local function table_files()
  local f = assert(io.open("docs/security.md"))
  local text = f:read("a")
  f:close()
  local section = assert((text .. "\n## "):match("\n## Rules for C bindings\n(.-)\n## "),
    "no section Rules for C bindings")
  local named = {}
  for line in section:gmatch("[^\n]+") do
    local cell = line:match("^| ([^|]-) |")
    if cell then
      for name in cell:gmatch("`src/([%w_]+%.[ch])`") do named[name] = true end
    end
  end
  return named
end

-- status_mib(field) and sample(series) for a program (support.luaop)
local STATUS_MIB = luaop.STATUS_MIB

describe("C bindings", function()
  it("keep every key of a table with weak values alive while cjson.encode writes it", function()
    -- The keys are only in the weak table, its values nowhere: made with
    -- the collector stopped, the values die in the first cycle that ends
    -- while encode runs, and their keys (marked in that cycle) in the
    -- next. Rounds of more live objects move those cycles' ends across
    -- the encoding; the round whose cycles end too early writes {}.
    local out = luaop.ok([[
      local json = require("luaop.core").json
      local bad, keys = 0, 0
      for round = 1, 12 do
        local ballast = {}
        for i = 1, round * 40000 do ballast[i] = { i } end
        collectgarbage("incremental", 200, 100)
        collectgarbage("collect")
        collectgarbage("stop")
        local t = setmetatable({}, { __mode = "v" })
        for i = 1, 3000 do t[("key-%d-%s"):format(i, ("x"):rep(41))] = {} end
        collectgarbage("incremental", 10, 100) -- a cycle after the other
        collectgarbage("restart")
        local text = json.encode(t)
        collectgarbage("incremental", 200, 100)
        for k, v in pairs(assert(json.decode(text))) do
          keys = keys + 1
          if not k:match("^key%-%d+%-" .. ("x"):rep(41) .. "$") or type(v) ~= "table" then bad = bad + 1 end
        end
      end
      print("keys", keys > 0, "bad", bad)
    ]], { offline = true, deadline = 120 })
    assert.matches("keys\ttrue\tbad\t0\n", out)
  end)

  it("read a table raw in cjson.encode, running none of its metamethods", function()
    local out = luaop.ok([[
      local cjson = require "cjson"
      local trap = function() error("a metamethod ran") end
      local mt = { __index = trap, __newindex = trap, __pairs = trap, __len = trap, __tostring = trap,
        __eq = trap, __lt = trap, __le = trap, __concat = trap, __call = trap, __name = "Trap" }
      local t = setmetatable({ b = setmetatable({ 1, 2 }, mt), a = "x" }, mt)
      print(cjson.encode(t))
    ]], { offline = true, deadline = 30 })
    assert.matches('{"a":"x","b":[1,2]}', out, 1, true)
  end)

  it("never run a log value's __tostring, so it cannot free the keys the log is sorting", function()
    -- the log:with route: a value's __tostring empties the logger's values
    -- (the very table being written) and forces a collection
    local out, err = luaop.ok([[
      local luaop = require "luaop"
      local values = {}
      for i = 1, 60 do values[("field-%02d-%s"):format(i, ("y"):rep(40))] = i end
      local ran = false
      local log
      values.zz = setmetatable({ function() end }, { __tostring = function()
        ran = true
        for k in pairs(log.values) do log.values[k] = nil end
        collectgarbage("collect")
        return "replaced"
      end })
      log = luaop.logger("bind"):with(values)
      values = nil
      collectgarbage("collect")
      log:info("fields")
      print("ran", ran)
    ]], { offline = true, deadline = 60 })
    assert.matches("ran\tfalse\n", out)
    local line = assert(err:match("\tINFO\tbind\tfields\t([^\n]*)"), err)
    local n = 0
    for _ in line:gmatch('"field%-%d%d%-y+": %d+') do n = n + 1 end
    assert.are.equal(60, n)
    assert.matches('"zz": "table: 0x%x+"', line)
  end)

  it("write a log value that is a table as JSON, or raw by type, running none of its metamethods", function()
    local _, err = luaop.ok([[
      local json = require("luaop.core").json
      local trap = function() error("a metamethod ran") end
      local mt = { __tostring = trap, __index = trap, __pairs = trap, __len = trap, __name = "Trap" }
      require("luaop").logger("raw"):info("values", {
        obj = setmetatable({ a = 1 }, mt),
        odd = setmetatable({ print }, mt),
        fn = print,
        co = coroutine.create(print),
        null = json.null,
      })
    ]], { offline = true, deadline = 30 })
    local line = assert(err:match("\tINFO\traw\tvalues\t([^\n]*)"), err)
    assert.matches('"obj": {"a":1}', line, 1, true)
    assert.matches('"odd": "table: 0x%x+"', line)
    assert.matches('"fn": "function: ', line, 1, true)
    assert.matches('"co": "thread: 0x%x+"', line)
    assert.matches('"null": null', line, 1, true)
  end)

  it("charge the log's buffers to the task's memory budget and free them when the call raises", function()
    -- each task's value encodes to 24 MiB of JSON (one 1 MiB string, 24
    -- times): past its 8 MiB budget. A buffer left behind at each raise
    -- would grow the process by 24 MiB a task; ASan's quarantine is kept
    -- small so that freed memory is given back to count
    local out = luaop.ok(STATUS_MIB .. [[
      local core = require "luaop.core"
      local big = ("x"):rep(1 << 20)
      local amp = {}
      for i = 1, 24 do amp[i] = big end
      collectgarbage("collect")
      local before, failed = status_mib("VmRSS"), 0
      for i = 1, 24 do
        local ok, e = core.task.spawn_limited({ memory = 8 << 20, instructions = 1e9 }, function()
          core.log.write("info", "amp", "big", { amp = amp })
        end):wait()
        if not ok and e:find("memory budget of 8388608 bytes exceeded", 1, true) then failed = failed + 1 end
      end
      collectgarbage("collect")
      print("failed", failed, "grew", status_mib("VmRSS") - before)
    ]], { offline = true, deadline = 120,
      env = { ASAN_OPTIONS = (os.getenv("ASAN_OPTIONS") or "") .. ":quarantine_size_mb=4" } })
    assert.matches("failed\t24\t", out)
    local grew = tonumber(out:match("grew\t(%-?%d+)"))
    assert.is_true(grew < 100, ("the process grew by %d MiB"):format(grew))
  end)

  it("grow cjson.encode's text within the task's memory budget, so a breach stops it before it is written", function()
    -- 256 MiB of JSON from one 1 MiB string: under an 8 MiB budget it
    -- fails at 8 MiB; uncharged, it would be written whole (the process's
    -- peak 256 MiB higher) before the budget saw the result
    local out = luaop.ok(STATUS_MIB .. [[
      local core = require "luaop.core"
      local big = ("x"):rep(1 << 20)
      local amp = {}
      for i = 1, 256 do amp[i] = big end
      local before = status_mib("VmHWM")
      local ok, e = core.task.spawn_limited({ memory = 8 << 20, instructions = 1e9 }, function()
        return require("cjson").encode(amp)
      end):wait()
      print("breach", not ok and e:find("memory budget of 8388608 bytes exceeded", 1, true) ~= nil, "peak", status_mib("VmHWM") - before)
    ]], { offline = true, deadline = 120 })
    assert.matches("breach\ttrue\t", out)
    local grew = tonumber(out:match("peak\t(%-?%d+)"))
    assert.is_true(grew < 100, ("the process's peak rose by %d MiB"):format(grew))
  end)

  it("charge cjson.encode's values as they are written, so a DAG of shared tables breaks the instruction budget "
    .. "before its text grows far", function()
    -- 2^22 leaves (about 12 MiB of text) in 23 tables: with 10^6
    -- instructions and 12 MiB, charged per value it fails on instructions
    -- at a few hundred kB of text; charged only for the text at the end, the
    -- text would grow until the memory budget broke (or the encode ran for
    -- as long as it liked, outside the watchdog's reach)
    local out = luaop.ok([[
      local core = require "luaop.core"
      local dag = { 0 }
      for _ = 1, 22 do dag = { dag, dag } end
      local ok, e = core.task.spawn_limited({ memory = 12 << 20, instructions = 1000000 }, function()
        return #require("cjson").encode(dag)
      end):wait()
      print("failed", not ok, tostring(e):match("(%a+) budget"))
    ]], { offline = true, deadline = 120 })
    assert.matches("failed\ttrue\tinstruction", out)
  end)

  it("are each in docs/security.md's table of bindings, and the table names no file that is gone", function()
    local files, named = lua_files(), table_files()
    local missing, gone = {}, {}
    for name in pairs(files) do
      if not named[name] then missing[#missing + 1] = name end
    end
    for name in pairs(named) do
      local f = io.open("src/" .. name)
      if f then f:close() else gone[#gone + 1] = name end
    end
    table.sort(missing)
    table.sort(gone)
    assert.are.same({}, missing, "files that touch a lua_State, missing from docs/security.md's table")
    assert.are.same({}, gone, "files in docs/security.md's table that do not exist")
    assert.is_true(files["lbind_log.c"] and files["json_encode.c"] and files["lbind_check.c"] ~= nil)
  end)
end)
