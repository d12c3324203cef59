-- operators/webhooks/at-webhooks.lua, with the test kit: the validation and
-- the conversion run through the webhook server's own request handling
-- (env:admit, env:convert), with no cluster and no TLS. Runs under busted
-- and under `luaop --test spec/unit/operators`.
local testing = require "luaop.testing"

local V1 = "cnat.programming-kubernetes.info/v1alpha1"

describe("operators/webhooks/at-webhooks.lua", function()
  local env
  before_each(function()
    env = testing.env {
      script = "operators/webhooks/at-webhooks.lua", manifests = { "manifests/crds" }, time = "2026-11-25T10:00:00Z",
    }
  end)
  after_each(function() if env then env:stop() end end)

  local function at(name, schedule, command)
    return { apiVersion = V1, kind = "At", metadata = { name = name, namespace = "default" },
      spec = { schedule = schedule, command = command } }
  end

  it("admits an At whose command is on the allow-list and whose schedule is within a year", function()
    local r = env:admit(at("a", "2026-11-25T11:00:00Z", "echo hello"))
    assert.is_true(r.allowed)
    assert.is_nil(r.warnings)
    assert.is_nil(r.patch)
  end)

  it("refuses a command whose first word is not on the allow-list, saying which", function()
    local r = env:admit(at("a", "2026-11-25T11:00:00Z", "rm -rf /"))
    assert.are.same({ false, 403, "Forbidden" }, { r.allowed, r.code, r.reason })
    assert.are.equal('spec.command: "rm" is not an allowed command (allowed: date, echo, env, sleep, true)', r.message)
  end)

  it("refuses a schedule more than a year ahead, and warns of one in the past", function()
    local r = env:admit(at("a", "2027-11-26T10:00:00Z", "date"))
    assert.is_false(r.allowed)
    assert.are.equal("spec.schedule: 2027-11-26T10:00:00Z is more than a year ahead", r.message)
    assert.is_true(env:admit(at("a", "2027-11-25T09:00:00Z", "date")).allowed)
    r = env:admit(at("a", "2026-11-25T09:00:00Z", "date"))
    assert.is_true(r.allowed)
    assert.are.same({ "spec.schedule is in the past: the At runs at once" }, r.warnings)
  end)

  it("validates an UPDATE's new object too", function()
    local old = at("a", "2026-11-25T11:00:00Z", "echo")
    local r = env:admit { operation = "UPDATE", oldObject = old, object = at("a", "2026-11-25T11:00:00Z", "curl x") }
    assert.is_false(r.allowed)
  end)

  it("converts v1alpha1 to v1alpha2 (schedule renamed runAt) and back, losslessly, status and metadata too", function()
    local ats = {
      at("a", "2026-11-25T11:00:00Z", "echo hello  world"),
      at("b", "2026-12-01T00:00:00Z", "date"),
      at("c", "2026-11-25T10:00:00Z", "sleep 5"),
    }
    ats[2].metadata.labels = { team = "x" }
    ats[2].metadata.annotations = { note = "kept" }
    ats[2].metadata.uid = "3b0c4a2e-0000-4000-8000-000000000002"
    ats[2].metadata.resourceVersion = "17"
    ats[2].metadata.generation = 2
    ats[3].status = { phase = "DONE", conditions = { { type = "Ready", status = "True", reason = "Done", message = "",
      lastTransitionTime = "2026-11-25T10:00:05Z", observedGeneration = 1 } } }
    for _, a in ipairs(ats) do
      local v2 = assert(env:convert(a, "v1alpha2"))
      assert.are.equal("cnat.programming-kubernetes.info/v1alpha2", v2.apiVersion)
      assert.are.same({ runAt = a.spec.schedule, command = a.spec.command }, v2.spec)
      assert.are.same(a.metadata, v2.metadata)
      assert.are.same(a.status, v2.status)
      assert.are.same(a, assert(env:convert(v2, "v1alpha1")))
      -- and the other way round: v1alpha2 -> v1alpha1 -> v1alpha2
      assert.are.same(v2, assert(env:convert(env:convert(v2, "v1alpha1"), "v1alpha2")))
    end
  end)

  it("fails a conversion to a version At does not have, with the script's message", function()
    local obj, err = env:convert(at("a", "2026-11-25T11:00:00Z", "echo"), "v9")
    assert.is_nil(obj)
    assert.matches("no such version of At: v9", err, 1, true)
  end)
end)
