-- luaop.plan: what a controller subscribes to. Events of its resource
-- enqueue the object; of an owned kind, the object's controller owner (by
-- its controller reference, of the controller's kind); of a watched kind,
-- what the watch's map names. Through the test kit.
local testing = require "luaop.testing"
local plan = require "luaop.plan"
local proc = require "support.proc"

local SCRIPT = [[
local luaop = require "luaop"
return luaop.controller {
  name = "p", resource = "v1/ConfigMap", namespace = "default",
  owns = { "v1/Secret" },
  watches = { { "v1/Service", map = function(svc)
    local target = svc.metadata.labels and svc.metadata.labels.target
    return target and { { namespace = "default", name = target } } or {}
  end } },
  reconcile = function(ctx, req) ctx.log:info("reconciled " .. req.name) end,
}
]]

describe("luaop.plan", function()
  local dir, env
  before_each(function()
    dir = proc.tempdir()
    env = testing.env { script = proc.write(dir, "p.lua", SCRIPT),
      objects = { { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "parent", namespace = "default", uid = "u-parent" } } } }
  end)
  after_each(function()
    env:stop()
    proc.sh("rm -rf " .. dir)
  end)

  local function reconciles(name) return #env:logs { msg = "^reconciled " .. name .. "$" } end

  local function secret(name, refs)
    return { apiVersion = "v1", kind = "Secret", metadata = { name = name, namespace = "default", ownerReferences = refs } }
  end

  it("enqueues the object an event of its resource is about", function()
    assert.are.equal(1, reconciles("parent"))
    env:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "other", namespace = "default" } }
    assert.are.equal(1, reconciles("other"))
  end)

  it("enqueues the controller owner of an owned object, of its own kind only, and no owner that is not the controller", function()
    env:create(secret("owned", { { apiVersion = "v1", kind = "ConfigMap", name = "parent", uid = "u-parent", controller = true } }))
    assert.are.equal(2, reconciles("parent"))
    env:create(secret("merely-owned", { { apiVersion = "v1", kind = "ConfigMap", name = "parent", uid = "u-parent" } }))
    env:create(secret("other-kind", { { apiVersion = "v1", kind = "Pod", name = "parent", uid = "u-pod", controller = true } }))
    assert.are.equal(2, reconciles("parent"))
    env:create(secret("orphan"))
    assert.are.equal(0, reconciles("owned") + reconciles("orphan"))
  end)

  it("enqueues what a watch's map names for an object of the watched kind", function()
    env:create { apiVersion = "v1", kind = "Service", metadata = { name = "s", namespace = "default", labels = { target = "parent" } } }
    assert.are.equal(2, reconciles("parent"))
    env:create { apiVersion = "v1", kind = "Service", metadata = { name = "t", namespace = "default" } }
    assert.are.equal(2, reconciles("parent"))
  end)

  it("splits a key into namespace and name", function()
    assert.are.same({ "default", "a" }, { plan.split_key("default/a") })
    assert.are.same({ nil, "cluster-wide" }, { plan.split_key("cluster-wide") })
  end)
end)
