-- One clock: a script's os.time, os.date and os.clock read luaop's clock,
-- so a script that uses them is tested in time by the kit (whose virtual
-- clock moves them) as one that uses luaop.time.
local luaop = require "luaop"
local testing = require "luaop.testing"
local kit = require "support.kit"

-- A controller that writes what os's clocks say into its ConfigMap.
local SCRIPT = [[
local luaop = require "luaop"
return luaop.controller {
  name = "clocks", resource = "v1/ConfigMap", label_selector = "clock=yes",
  reconcile = function(ctx, req)
    local cm = ctx:get("ConfigMap", req)
    if not cm then return end
    cm.data = { time = tostring(os.time()), date = os.date("!%Y-%m-%dT%H:%M:%SZ"), clock = tostring(os.clock()),
      wall = luaop.time.format(luaop.time.wall()), table = tostring(os.date("!*t").hour),
      given = os.date("!%Y", 0), made = tostring(os.time { year = 2000, month = 1, day = 1, hour = 0 }) }
    assert(ctx:update(cm))
    return luaop.requeue_after(3600)
  end,
}
]]

describe("a script's os clocks", function()
  local t = kit.per_test(before_each, after_each)

  it("read luaop's clock: os.time and os.date are the kit's virtual time, os.clock its monotonic seconds, " ..
    "and they move only when the kit's clock does", function()
    local path = t.dir .. "/clocks.lua"
    local f = assert(io.open(path, "w"))
    f:write(SCRIPT)
    f:close()
    t.env = testing.env { script = path, time = "2026-11-25T10:00:00Z" }
    local env = t.env
    local cm = kit.cm("c", {})
    cm.metadata.labels = { clock = "yes" }
    assert(env:create(cm))
    local d = env:get("ConfigMap", "c").data
    assert.are.equal("2026-11-25T10:00:00Z", d.date)
    assert.are.equal(tostring(math.floor(luaop.time.parse("2026-11-25T10:00:00Z"))), d.time)
    assert.are.equal(d.wall, d.date)
    assert.are.equal("10", d.table)
    assert.are.equal("1970", d.given) -- a time given is that time
    local clock = tonumber(d.clock)
    env:advance(3600)
    d = env:get("ConfigMap", "c").data
    assert.are.equal("2026-11-25T11:00:00Z", d.date)
    assert.are.equal("11", d.table)
    -- (written through tostring: 14 digits of a float)
    assert.is_true(math.abs(tonumber(d.clock) - clock - 3600) < 1e-6, d.clock .. " after " .. clock)
    assert.are.equal(d.wall, d.date)
  end)
end)

describe("a script's os clocks, misused", function()
  it("raise at the script's line with the function's name, as Lua's own functions do", function()
    local run = require "support.luaop"
    local code, out, err = run.run([[
      local ok, e = pcall(function() local d = os.date("%Q") return d end)
      print(e)
      ok, e = pcall(function() local t = os.time {} return t end)
      print(e)
      print(math.type(os.time()), os.date("!%Y", 86400 * 366), os.time { year = 1970, month = 1, day = 2, hour = 0 } > 0)
      error("end of probe", 0)
    ]], { offline = true, script = true })
    assert.are.equal(1, code, err)
    assert.matches("end of probe", err) -- (the probe's own end: not a sanitizer's exit 1)
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.matches("%.lua:1: bad argument #1 to 'os.date' %(invalid conversion specifier '%%Q'%)$", lines[1])
    assert.matches("%.lua:3: os.time: field 'year' missing in date table$", lines[2])
    assert.are.equal("integer\t1971\ttrue", lines[3])
    assert.is_nil(out:find("sandbox.lua", 1, true))
  end)
end)

describe("luaop --check and a script's os clocks", function()
  it("warns where a script reads os.clock (luaop's monotonic clock, not the processor's), " ..
    "says nothing of os.time and os.date, and exits 0", function()
    local proc = require "support.proc"
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. proc.quote(dir)) end)
    local f = assert(io.open(dir .. "/c.lua", "w"))
    f:write([[
local luaop = require "luaop"
local t0 = os.clock()
return luaop.controller { name = "c", resource = "v1/ConfigMap", reconcile = function()
  luaop.log:info("x", { d = os.clock() - t0, t = os.time(), at = os.date("!%H:%M") })
end }
]])
    f:close()
    local ok, out = proc.sh("build/luaop --check " .. proc.quote(dir .. "/c.lua") .. " 2>&1")
    assert.is_true(ok, out)
    assert.matches("c%.lua:2: warning: os%.clock is luaop's monotonic clock %(seconds that only go forward, moved by "
      .. "the kit's clock under %-%-test%), not the processor time plain Lua's os%.clock says: "
      .. "luaop%.time%.monotonic%(%) says so; 1 other place in this script uses it too", out)
    assert.is_nil(out:find("os.time", 1, true), out)
    assert.is_nil(out:find("os.date", 1, true), out)
    assert.matches("0 findings, 1 warning", out)
  end)
end)
