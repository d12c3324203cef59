-- luaop.object: a deep copy that keeps JSON arrays, and owner references
-- as controller-runtime's controllerutil sets them (luaop.copy,
-- luaop.controller_of, luaop.set_controller).
local object = require "luaop.object"
local json = require("luaop.core").json

local function owner(fields)
  local o = { apiVersion = "example.com/v1", kind = "Machine",
    metadata = { name = "m", namespace = "default", uid = "u-1" } }
  for k, v in pairs(fields or {}) do o.metadata[k] = v end
  return o
end

describe("luaop.object", function()
  it("copies deeply: nothing shared, arrays still arrays, no metatable of another's carried over", function()
    local src = json.decode('{"a": {"b": [1, {"c": []}]}, "e": {}}')
    setmetatable(src.a, { __index = function() return "x" end })
    local c = object.copy(src)
    assert.are.same(src.a.b[2], c.a.b[2])
    assert.are_not.equal(src.a, c.a)
    assert.are_not.equal(src.a.b, c.a.b)
    assert.is_true(json.is_array(c.a.b))
    assert.is_true(json.is_array(c.a.b[2].c))
    assert.are.equal('{"a":{"b":[1,{"c":[]}]},"e":{}}', json.encode(c))
    assert.is_nil(getmetatable(c.a))
    assert.are.equal(5, object.copy(5))
  end)

  it("finds an object's controller reference, or nil", function()
    local obj = { metadata = { ownerReferences = {
      { kind = "A", name = "a", uid = "1" }, { kind = "B", name = "b", uid = "2", controller = true } } } }
    assert.are.equal("b", object.controller_of(obj).name)
    assert.is_nil(object.controller_of { metadata = {} })
    assert.is_nil(object.controller_of("not an object"))
  end)

  it("makes an owner the controller as SetControllerReference does, once, replacing its own earlier reference", function()
    local obj = { kind = "Switch", metadata = { name = "s", namespace = "default" } }
    assert.are.equal(obj, object.set_controller(obj, owner()))
    assert.are.same({ { apiVersion = "example.com/v1", kind = "Machine", name = "m", uid = "u-1",
      controller = true, blockOwnerDeletion = true } }, obj.metadata.ownerReferences)
    assert.is_true(json.is_array(obj.metadata.ownerReferences))
    object.set_controller(obj, owner())
    assert.are.equal(1, #obj.metadata.ownerReferences)
  end)

  it("refuses a second controller, an owner in another namespace, and an owner never read from the server", function()
    local obj = { kind = "Switch", metadata = { name = "s", namespace = "default" } }
    object.set_controller(obj, owner())
    local ok, err = pcall(object.set_controller, obj, owner { uid = "u-2", name = "other" })
    assert.is_false(ok)
    assert.matches("Switch s is controlled by Machine m already", err)
    ok, err = pcall(object.set_controller, { metadata = { name = "t", namespace = "elsewhere" } }, owner())
    assert.is_false(ok)
    assert.matches("an owner in namespace default can only own objects in it", err)
    ok, err = pcall(object.set_controller, { metadata = {} }, owner { uid = 42 })
    assert.is_false(ok)
    assert.matches("needs apiVersion, kind, metadata.name and metadata.uid", err)
    -- a cluster-scoped owner may own an object anywhere
    local cluster = owner()
    cluster.metadata.namespace = nil
    assert.is_true(pcall(object.set_controller, { metadata = { name = "q", namespace = "team-a" } }, cluster))
  end)
end)
