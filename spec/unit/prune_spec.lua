-- luaop.testing.apiserver.prune: a custom resource's fields its CRD's
-- schema does not name are dropped on create, update, patch and /status,
-- as kube-apiserver's structural pruning drops them
-- (spec/e2e/parity_spec.lua compares it with the API server's).
local core = require "luaop.core"
local apiserver = require "luaop.testing.apiserver"
local testing = require "luaop.testing"
local luaop = require "luaop"
local proc = require "support.proc"
local kit = require "support.kit"

local json = core.json
local PATH = "/apis/example.com/v1/namespaces/default/widgets"

local SCHEMA = {
  type = "object",
  properties = {
    spec = { type = "object", properties = {
      size = { type = "integer" },
      labels = { type = "object", additionalProperties = { type = "string" } },
      anything = { type = "object", additionalProperties = true },
      items = { type = "array", items = { type = "object", properties = { name = { type = "string" } } } },
      free = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true,
        properties = { known = { type = "object", properties = { a = { type = "string" } } } } },
      template = { type = "object", ["x-kubernetes-embedded-resource"] = true,
        properties = { spec = { type = "object", properties = { x = { type = "string" } } } } },
    } },
    status = { type = "object", properties = { phase = { type = "string" } } },
  },
}

local function crd(schema)
  return {
    apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
    metadata = { name = "widgets.example.com" },
    spec = { group = "example.com", scope = "Namespaced", names = { kind = "Widget", plural = "widgets" },
      versions = { { name = "v1", served = true, storage = true, subresources = { status = {} },
        schema = schema and { openAPIV3Schema = schema } or nil } } },
  }
end

local function call(s, method, path, body, ctype)
  local code, text = s:request(method, path, json.encode(body), ctype)
  return code, json.decode(text)
end

local function widget(spec, extra)
  local obj = { apiVersion = "example.com/v1", kind = "Widget", metadata = { name = "w", labels = { a = "b" } },
    spec = spec }
  for k, v in pairs(extra or {}) do obj[k] = v end
  return obj
end

describe("the kit's API server prunes a custom resource", function()
  local t = kit.per_test(before_each, after_each)

  it("of the fields its schema does not name, on create, update, patch and /status, as kube-apiserver does", function()
    local s = apiserver.new { now = function() return 1800000000 end, seed = 3 }
    s:add_crd(crd(SCHEMA))
    local code, w = call(s, "POST", PATH, widget({ size = 3, extra = 1, labels = { x = "y" },
      anything = { a = { b = 1 } }, items = json.array { { name = "n", bogus = 1 } },
      free = { what = { ever = 1 }, known = { a = "1", b = "2" } },
      template = { apiVersion = "v1", kind = "Pod", metadata = { name = "p" }, spec = { x = "1", y = "2" }, z = 3 } },
      { extra = "top" }))
    assert.are.equal(201, code)
    assert.are.same({ size = 3, labels = { x = "y" }, anything = { a = { b = 1 } }, items = { { name = "n" } },
      free = { what = { ever = 1 }, known = { a = "1" } },
      template = { apiVersion = "v1", kind = "Pod", metadata = { name = "p" }, spec = { x = "1" } } }, w.spec)
    assert.is_nil(w.extra)
    assert.are.same({ a = "b" }, w.metadata.labels) -- metadata is the API server's own
    w.spec.more = 1
    code, w = call(s, "PUT", PATH .. "/w", w)
    assert.are.equal(200, code)
    assert.is_nil(w.spec.more)
    code, w = call(s, "PATCH", PATH .. "/w", { spec = { more = 1, size = 4 } }, "application/merge-patch+json")
    assert.are.equal(200, code)
    assert.are.same({ nil, 4 }, { w.spec.more, w.spec.size })
    code, w = call(s, "PATCH", PATH .. "/w/status",
      { status = { phase = "Up", conditions = json.array { { type = "Ready" } } } }, "application/merge-patch+json")
    assert.are.equal(200, code)
    assert.are.same({ phase = "Up" }, w.status)
  end)

  it("not at all when its version has no schema, or a root that keeps unknown fields", function()
    for _, schema in ipairs { false, { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } do
      local s = apiserver.new { now = function() return 1800000000 end, seed = 3 }
      s:add_crd(crd(schema or nil))
      local code, w = call(s, "POST", PATH, widget({ size = 3, extra = 1 }, { extra = "top" }))
      assert.are.equal(201, code)
      assert.are.same({ { size = 3, extra = 1 }, "top" }, { w.spec, w.extra })
    end
  end)

  it("so a condition a controller writes that the CRD's status schema leaves out reads back absent", function()
    local dir = t.dir
    local crds = proc.write(dir, "crd.json", json.encode(crd(SCHEMA)))
    local script = proc.write(dir, "w.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "w", resource = "example.com/v1/Widget", filter = "generation",
  reconcile = function(ctx, req)
    local w = ctx:get("Widget", req)
    if w and luaop.conditions.set(w, { type = "Ready", status = "True", reason = "Up" }) then
      assert(ctx:update_status(w))
    end
  end }
]])
    local env = testing.env { script = script, manifests = { crds } }
    assert(env:create(widget({ size = 1 })))
    assert.is_nil(luaop.conditions.get(env:get("Widget", "w"), "Ready"))
    assert.are.equal(1, #env:actions { verb = "update", subresource = "status" })
    t.env = env
  end)
end)
