-- luaop.plan: what a controller subscribes to. Events of its resource
-- enqueue the object; of an owned kind, the object's controller owner (by
-- its controller reference, of the controller's group and kind, keyed by
-- the owner's scope); of a watched kind, what the watch's map names.
-- Through the test kit.
local testing = require "luaop.testing"
local plan = require "luaop.plan"
local proc = require "support.proc"
local kit = require "support.kit"

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

-- A map that returns one request where a list is wanted enqueued nothing,
-- silently (issue 31's trial): one request is taken as a list of one, and
-- what is neither fails the event, naming the map.
describe("a watch's map", function()
  local t = kit.per_test(before_each, after_each)

  it("may return one request, or nothing; anything else fails the event naming the map's file and line", function()
    t.env = testing.env { script = proc.write(t.dir, "m.lua", [[
local luaop = require "luaop"
return luaop.controller {
  name = "m", resource = "v1/ConfigMap",
  watches = { { "v1/Service", map = function(svc)
    local ret = svc.metadata.labels.ret
    if ret == "one" then return { namespace = svc.metadata.namespace, name = "target" } end
    if ret == "list" then return { { namespace = "default", name = "target" }, { name = "cluster-wide" } } end
    if ret == "nil" then return nil end
    if ret == "false" then return false end
    if ret == "string" then return "target" end
    if ret == "object" then return svc end
    if ret == "noname" then return { { namespace = "default" } } end
    if ret == "badns" then return { namespace = 5, name = "target" } end
  end } },
  reconcile = function(ctx, req) ctx.log:info("reconciled", { key = (req.namespace or "") .. "/" .. req.name }) end,
}
]]) }
    local function service(name, ret)
      assert(t.env:create { apiVersion = "v1", kind = "Service",
        metadata = { name = name, namespace = "default", labels = { ret = ret } } })
    end
    local function keys()
      local out = {}
      for _, l in ipairs(t.env:logs { msg = "^reconciled$" }) do out[#out + 1] = l.fields.key end
      return out
    end
    service("a", "one")
    assert.are.same({ "default/target" }, keys())
    service("b", "list")
    assert.are.same({ "default/target", "default/target", "/cluster-wide" }, keys())
    for _, ret in ipairs { "nil", "false" } do service(ret, ret) end
    assert.are.same({}, t.env:logs { msg = "^event handler failed$" })
    local want = {
      string = 'returned the string "target": want a list of requests',
      object = "returned a table that is neither a list of requests nor a request %(no name%)",
      noname = "returned a request %(1%) whose name is nil, not a non%-empty string",
      badns = "returned a request %(1%) whose namespace is the number 5, not a string",
    }
    for _, ret in ipairs { "string", "object", "noname", "badns" } do
      service(ret, ret)
      local failed = t.env:logs { msg = "^event handler failed$" }
      assert.matches("^watch map of v1/Service %(.*m%.lua:4%) " .. want[ret], failed[#failed].fields.error)
    end
    assert.are.equal(4, #t.env:logs { msg = "^event handler failed$" })
    assert.are.equal(3, #keys())
  end)
end)

-- Issue 32, item 8: an owned object's event enqueued its controller owner
-- under the object's own namespace, so a cluster-scoped owner (a Namespace
-- owning the ResourceQuota made for it) got a key no cache answers
-- ("team-a/team-a": ctx:get said NotFound, a deleted quota was never made
-- again) beside its own ("team-a"), two keys of one object; and an owner
-- of the same kind in another API group enqueued it too. As
-- controller-runtime's EnqueueRequestForOwner: the owner's group and kind,
-- and its scope from discovery.
local QUOTAS = [[
local luaop = require "luaop"
return luaop.controller {
  name = "quotas", resource = "v1/Namespace", owns = { "v1/ResourceQuota" }, concurrency = 2,
  reconcile = function(ctx, req)
    ctx.log:info("reconciled", { key = (req.namespace or "") .. "/" .. req.name })
    local ns = ctx:get("Namespace", req)
    if not ns or not (ns.metadata.labels or {}).team then return end
    if not ctx:get("ResourceQuota", "team-quota", ns.metadata.name) then
      assert(ctx:create(luaop.set_controller({ apiVersion = "v1", kind = "ResourceQuota",
        metadata = { name = "team-quota", namespace = ns.metadata.name }, spec = { hard = { pods = "10" } } }, ns)))
    end
  end,
}
]]

describe("an owned object's cluster-scoped owner", function()
  local t = kit.per_test(before_each, after_each)

  local function keys()
    local seen, out = {}, {}
    for _, l in ipairs(t.env:logs { msg = "^reconciled$" }) do
      if not seen[l.fields.key] then seen[l.fields.key], out[#out + 1] = true, l.fields.key end
    end
    table.sort(out)
    return out
  end
  local function reconciles(key)
    local n = 0
    for _, l in ipairs(t.env:logs { msg = "^reconciled$" }) do n = n + (l.fields.key == key and 1 or 0) end
    return n
  end

  it("is enqueued by name alone, one key per Namespace: a deleted ResourceQuota it owns is made again", function()
    t.env = testing.env { script = proc.write(t.dir, "quotas.lua", QUOTAS) }
    assert(t.env:create { apiVersion = "v1", kind = "Namespace", metadata = { name = "team-a", labels = { team = "a" } } })
    local quota = t.env:get("ResourceQuota", "team-quota", "team-a")
    assert.is_not_nil(quota)
    assert.are.same({ { apiVersion = "v1", kind = "Namespace", name = "team-a", uid = t.env:get("Namespace", "team-a").metadata.uid,
      controller = true, blockOwnerDeletion = true } }, quota.metadata.ownerReferences)
    assert(t.env:delete("ResourceQuota", { namespace = "team-a", name = "team-quota" }))
    local again = t.env:get("ResourceQuota", "team-quota", "team-a")
    assert.is_not_nil(again, "the deleted ResourceQuota was not made again")
    assert.are_not.equal(quota.metadata.uid, again.metadata.uid)
    assert.are.equal(2, #t.env:actions { verb = "create", kind = "ResourceQuota" })
    -- one key for each Namespace, with no namespace: never "team-a/team-a"
    assert.are.same({ "/default", "/kube-node-lease", "/kube-public", "/kube-system", "/team-a" }, keys())
    assert.is_true(reconciles("/team-a") >= 3) -- created; its quota created; its quota deleted
  end)

  it("is matched by group and kind: an owner reference to a Namespace of another API group enqueues nothing", function()
    t.env = testing.env { script = proc.write(t.dir, "quotas.lua", QUOTAS) }
    assert(t.env:create { apiVersion = "v1", kind = "Namespace", metadata = { name = "other" } })
    local before = reconciles("/other") + reconciles("other/other")
    assert.are.equal(1, before)
    assert(t.env:create { apiVersion = "v1", kind = "ResourceQuota", metadata = { name = "foreign", namespace = "other",
      ownerReferences = { { apiVersion = "example.com/v1", kind = "Namespace", name = "other", uid = "u-foreign",
        controller = true } } } })
    assert.are.equal(before, reconciles("/other") + reconciles("other/other"))
    -- the core group's Namespace does enqueue it (the same event, its own group)
    local ns = t.env:get("Namespace", "other")
    assert(t.env:create { apiVersion = "v1", kind = "ResourceQuota", metadata = { name = "mine", namespace = "other",
      ownerReferences = { { apiVersion = "v1", kind = "Namespace", name = "other", uid = ns.metadata.uid,
        controller = true } } } })
    assert.are.equal(before + 1, reconciles("/other"))
    assert.are.equal(0, reconciles("other/other"))
  end)
end)
