-- operators/secret-copy.lua's contract (DESIGN.md), with the test kit.
local testing = require "luaop.testing"

local TYPE = "k8s.ziwon.dev/secretsync"

describe("operators/secret-copy.lua", function()
  local env
  before_each(function()
    env = testing.env {
      script = "operators/secret-copy.lua",
      objects = {
        { apiVersion = "v1", kind = "Namespace", metadata = { name = "secretsync" } },
        { apiVersion = "v1", kind = "Namespace", metadata = { name = "team-a" } },
      },
    }
  end)
  after_each(function() if env then env:stop() end end)

  local function source(name, data, type_)
    return { apiVersion = "v1", kind = "Secret", type = type_ or TYPE,
      metadata = { name = name, namespace = "secretsync" }, data = data }
  end

  local function namespaces_with(name)
    local out = {}
    for _, s in ipairs(env:list("Secret")) do
      if s.metadata.name == name and s.metadata.namespace ~= "secretsync" then out[#out + 1] = s.metadata.namespace end
    end
    table.sort(out)
    return out
  end

  it("copies a source into every namespace but its own and kube-system, kube-public, kube-node-lease", function()
    env:create(source("db", { password = "czNjcjN0" }))
    assert.are.same({ "default", "team-a" }, namespaces_with("db"))
    local copy = env:get("Secret", "db", "team-a")
    assert.are.same({ password = "czNjcjN0" }, copy.data)
    assert.are.equal(TYPE, copy.type)
    assert.are.equal("db", copy.metadata.labels["secretsync.k8s.ziwon.dev/source"])
    -- and the source holds the finalizer that lets the copies go first
    assert.are.same({ "secretsync.k8s.ziwon.dev/copies" }, env:get("Secret", "db", "secretsync").metadata.finalizers)
  end)

  it("leaves other Secrets of its namespace alone", function()
    env:create(source("plain", { a = "Yg==" }, "Opaque"))
    assert.are.same({}, namespaces_with("plain"))
  end)

  it("updates the copies with the source, and puts back a copy that drifts or goes", function()
    env:create(source("db", { password = "b2xk" }))
    local src = env:get("Secret", "db", "secretsync")
    src.data = { password = "bmV3" }
    assert(env:update(src))
    assert.are.same({ password = "bmV3" }, env:get("Secret", "db").data)
    local copy = env:get("Secret", "db", "team-a")
    copy.data = { password = "ZHJpZnQ=" }
    assert(env:update(copy))
    assert.are.same({ password = "bmV3" }, env:get("Secret", "db", "team-a").data)
    assert(env:delete("Secret", { namespace = "team-a", name = "db" }))
    assert.are.same({ password = "bmV3" }, env:get("Secret", "db", "team-a").data)
  end)

  it("copies into a namespace created later", function()
    env:create(source("db", { password = "eA==" }))
    assert(env:create { apiVersion = "v1", kind = "Namespace", metadata = { name = "late" } })
    assert.are.same({ "default", "late", "team-a" }, namespaces_with("db"))
  end)

  it("removes the copies, then lets the source go, when the source is deleted", function()
    env:create(source("db", { password = "eA==" }))
    assert(env:delete("Secret", { namespace = "secretsync", name = "db" }))
    assert.are.same({}, namespaces_with("db"))
    assert.is_nil(env:get("Secret", "db", "secretsync"))
  end)
end)
