-- luaop.manager and luaop.manager.caches: controllers in sets, one per
-- script, on shared informers; a reload swaps a script's controllers
-- without dropping the caches they still use. Through the test kit.
local testing = require "luaop.testing"
local proc = require "support.proc"
local kit = require "support.kit"

-- A script of one controller per {name, kind}, each logging "<version>
-- <name> <key>" when it reconciles.
local function script(version, controllers)
  local defs = {}
  for _, c in ipairs(controllers) do
    defs[#defs + 1] = ([[luaop.controller { name = %q, resource = %q, namespace = "default",
      reconcile = function(ctx, req) ctx.log:info(%q .. " " .. req.namespace .. "/" .. req.name) end }]])
      :format(c[1], c[2], version .. " " .. c[1])
  end
  return "local luaop = require 'luaop'\nreturn {\n" .. table.concat(defs, ",\n") .. "\n}\n"
end

local cm = kit.cm

describe("luaop.manager", function()
  local t = kit.per_test(before_each, after_each)
  local path
  before_each(function() path = t.dir .. "/ops.lua" end)

  -- How many informers were started on resource (a streamed list each).
  local function watches(resource)
    return #t.env:actions { reads = true, verb = "watch", resource = resource }
  end
  local function reconciled(prefix)
    return #t.env:logs { msg = "^" .. prefix:gsub("%p", "%%%0") }
  end

  it("feeds controllers of one kind, namespace and selectors from one informer", function()
    proc.write(t.dir, "ops.lua", script("v1", { { "a", "v1/ConfigMap" }, { "b", "v1/ConfigMap" } }))
    t.env = testing.env { script = path, objects = { cm("x") } }
    assert.are.equal(1, watches("configmaps"))
    assert.are.equal(1, reconciled("v1 a default/x"))
    assert.are.equal(1, reconciled("v1 b default/x"))
    assert.are.equal(1, #t.env.manager:caches_of("ConfigMap", "default"))
  end)

  it("keeps an informer a reload still uses (no new list), starts a new one, and stops one no longer used", function()
    proc.write(t.dir, "ops.lua", script("v1", { { "a", "v1/ConfigMap" } }))
    t.env = testing.env { script = path, objects = { cm("x") } }
    t.env:load(path, script("v2", { { "a", "v1/ConfigMap" }, { "s", "v1/Secret" } }))
    t.env:run()
    assert.are.equal(1, watches("configmaps"))
    assert.are.equal(1, watches("secrets"))
    t.env:load(path, script("v3", { { "s", "v1/Secret" } }))
    t.env:run()
    assert.are.same({}, t.env.manager:caches_of("ConfigMap", "default"))
    assert.are.equal(1, #t.env.manager:caches_of("Secret", "default"))
  end)

  it("requeues every object of a reloaded controller once, and runs the new code from then on", function()
    proc.write(t.dir, "ops.lua", script("v1", { { "a", "v1/ConfigMap" } }))
    t.env = testing.env { script = path, objects = { cm("x"), cm("y") } }
    assert.are.equal(2, reconciled("v1 a"))
    t.env:load(path, script("v2", { { "a", "v1/ConfigMap" } }))
    t.env:advance(1)
    assert.are.equal(1, reconciled("v2 a default/x"))
    assert.are.equal(1, reconciled("v2 a default/y"))
    t.env:create(cm("z"))
    assert.are.equal(1, reconciled("v2 a default/z"))
    assert.are.equal(2, reconciled("v1 a"))
  end)

  it("stops the controllers a reload no longer defines", function()
    proc.write(t.dir, "ops.lua", script("v1", { { "a", "v1/ConfigMap" }, { "b", "v1/ConfigMap" } }))
    t.env = testing.env { script = path }
    t.env:load(path, script("v2", { { "a", "v1/ConfigMap" } }))
    t.env:create(cm("x"))
    assert.are.equal(1, reconciled("v2 a default/x"))
    assert.are.equal(0, reconciled("v2 b"))
    assert.are.equal(0, reconciled("v1 b"))
    assert.is_nil(t.env.manager.controllers.b)
  end)
end)
