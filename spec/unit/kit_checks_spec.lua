-- The test kit refuses what it would otherwise ignore (luaop.testing.checks,
-- a first user's trial of issue 31): an unknown option, filter key, verb or
-- reason, a value of the wrong type, each at the spec's line with the
-- closest known name; core.log.write as the kit replaces it refuses what
-- luaop's C one refuses, with the same errors; and the kit's own frames are
-- told from a user's by their exact chunk names (guard.is_kit).
local testing = require "luaop.testing"
local guard = require "luaop.testing.guard"
local core = require "luaop.core"
local proc = require "support.proc"
local kit = require "support.kit"

local SCRIPT = [[
local luaop = require "luaop"
return luaop.controller { name = "chk", resource = "v1/ConfigMap", reconcile = function(ctx, req)
  local cm = ctx:get("ConfigMap", req)
  if cm and not ctx:get("ConfigMap", req.name .. "-child", req.namespace) and not req.name:match("%-child$") then
    assert(ctx:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = req.name .. "-child",
      namespace = req.namespace } })
  end
end }
]]

describe("the test kit's checks", function()
  local t = kit.per_test(before_each, after_each)

  local function raises(fn, ...)
    local ok, err = pcall(fn, ...)
    assert.is_false(ok, "no error")
    err = tostring(err)
    assert.matches("kit_checks_spec%.lua:%d+: ", err) -- at the spec's line
    return err
  end
  local function has(err, text) assert.is_truthy(err:find(text, 1, true), err) end

  it("refuses an unknown option or a value of the wrong type of testing.env, and takes scripts as a string", function()
    local path = proc.write(t.dir, "chk.lua", SCRIPT)
    has(raises(testing.env, { script = path, namepsace = "a" }),
      'testing.env: unknown key "namepsace" (did you mean "namespace"?); it knows deadline, manifests,')
    has(raises(testing.env, { script = path, deadline = "5" }), 'testing.env: deadline must be a number >= 0, got "5"')
    has(raises(testing.env, { scripts = { path, 3 } }), "scripts must be a string or a list of strings, got table")
    has(raises(testing.env, { script = path, max_reconciles = 1.5 }), "max_reconciles must be an integer >= 0")
    has(raises(testing.env, "x.lua"), "testing.env needs a table, got string")
    t.env = testing.env { scripts = path } -- a string: the one script
    assert(t.env:create(kit.cm("a")))
    assert.is_not_nil(t.env:get("ConfigMap", "a-child"))
  end)

  it("refuses an unknown filter key or verb of env:actions, and an unknown key, verb or reason of env:fail", function()
    t.env = testing.env { script = proc.write(t.dir, "chk.lua", SCRIPT) }
    has(raises(t.env.actions, t.env, { verbb = "create" }), 'env:actions: unknown key "verbb" (did you mean "verb"?)')
    has(raises(t.env.actions, t.env, { verb = "pacth" }), 'env:actions: unknown verb "pacth" (did you mean "patch"?)')
    has(raises(t.env.actions, t.env, { verb = 1 }), "env:actions: verb must be a string, got number")
    has(raises(t.env.fail, t.env, { verb = "craete" }), 'env:fail: unknown verb "craete" (did you mean "create"?)')
    has(raises(t.env.fail, t.env, { reason = "Conflcit" }), 'env:fail: unknown reason "Conflcit" (did you mean "Conflict"?)')
    has(raises(t.env.fail, t.env, { verb = "create", tiems = 2 }), 'env:fail: unknown key "tiems" (did you mean "times"?)')
    -- what is right still works
    t.env:fail { verb = "create", kind = "ConfigMap", reason = "Conflict" }
    assert(t.env:create(kit.cm("b")))
    assert.are.equal(1, #t.env:actions { verb = "create", injected = true })
    assert.are.equal(0, #t.env:actions { verb = "patch" })
  end)

  it("takes env:advance's seconds as a number or a duration, and says so of anything else", function()
    t.env = testing.env { script = proc.write(t.dir, "chk.lua", SCRIPT), time = 0 }
    t.env:advance("10m")
    assert.is_true(math.abs(t.env:now() - 600) < 1e-6, t.env:now()) -- (valgrind rounds doubles its own way)
    t.env:advance(30)
    assert.is_true(math.abs(t.env:now() - 630) < 1e-6, t.env:now())
    has(raises(t.env.advance, t.env, "soon"), 'env:advance needs a number of seconds from 0 to 100 years, or a '
      .. 'duration such as "10m", got "soon"')
    has(raises(t.env.advance, t.env, -1), "got -1")
  end)

  it("refuses in core.log.write what luaop's C write refuses, with its errors", function()
    local real = core.log.write
    t.env = testing.env { script = proc.write(t.dir, "chk.lua", SCRIPT) }
    local kits = core.log.write
    local function call(args) core.log.write(table.unpack(args, 1, 4)) end
    assert.are_not.equal(real, kits)
    for _, args in ipairs {
      { "info", "x", { a = 1 } }, -- ctx.log.info("msg", {...}): a dot, not a colon
      { "info", "x" }, { "error", "x", "m", "fields" }, { "error", "x", "m", { [1] = "v" } },
      { "loud", "x", "m" }, { {}, "x", "m" }, { 1.5, "x", "m" }, { "error", {}, "m" }, { "error", "x", true },
    } do
      -- (called as logging.lua calls it, from one line: the C error names the field and that line)
      core.log.write = real
      local rok, rerr = pcall(call, args)
      core.log.write = kits
      local kok, kerr = pcall(call, args)
      assert.is_false(rok, "the C write took it")
      assert.are.same({ rok, rerr }, { kok, kerr })
    end
    kits("error", 7, 3, { n = 1, t = { x = 1 } }) -- a number for a string, as Lua's C API takes it
    assert.are.equal("3", tostring(t.env:logs { level = "error" }[1].msg))
  end)

  it("tells the kit's own frames from a user's spec under a directory named luaop/testing", function()
    assert.is_true(guard.is_kit(debug.getinfo(guard.where, "S").source))
    assert.is_true(guard.is_kit(debug.getinfo(testing.env, "S").source))
    assert.is_false(guard.is_kit("@/home/u/luaop/testing/init.lua"))
    assert.is_false(guard.is_kit("@/home/u/lua/luaop/testing/x_spec.lua"))
    local dir = t.dir .. "/luaop/testing"
    proc.sh("mkdir -p " .. proc.quote(dir))
    proc.write(dir, "op.lua", SCRIPT)
    proc.write(dir, "u_spec.lua", [[
local testing = require "luaop.testing"
describe("u", function()
  it("finds op.lua beside it", function()
    local env = testing.env { script = "op.lua" }
    env:stop()
  end)
  it("names its own line", function()
    testing.env { script = "missing.lua" }
  end)
end)
]])
    local bin = require("support.luaop").bin
    bin = bin:sub(1, 1) == "/" and bin or proc.cwd() .. "/" .. bin
    local ok, out = proc.sh(("cd / && %s --test %s"):format(proc.quote(bin), proc.quote(dir .. "/u_spec.lua")))
    assert.is_false(ok, out)
    assert.matches("ok 1 %- u finds op%.lua beside it\n", out)
    assert.matches("not ok 2 %- u names its own line\n# [^\n]*luaop/testing/u_spec%.lua:8: cannot find missing%.lua", out)
  end)
end)
