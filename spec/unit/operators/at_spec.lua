-- operators/at.lua's contract (DESIGN.md), with the test kit: its real
-- controller, informers and work queue against the in-memory API server,
-- on a clock that moves only when told. No cluster, no sleeps. Runs under
-- busted and under `luaop --test spec/unit/operators`.
local luaop = require "luaop"
local testing = require "luaop.testing"

local GROUP = "cnat.programming-kubernetes.info/v1alpha1"

describe("operators/at.lua", function()
  local env
  before_each(function()
    env = testing.env {
      script = "operators/at.lua", manifests = { "manifests/crds" }, time = "2026-11-25T10:00:00Z",
    }
  end)
  after_each(function() if env then env:stop() end end)

  local function new_at(name, schedule, command)
    return {
      apiVersion = GROUP, kind = "At", metadata = { name = name, namespace = "default" },
      spec = { schedule = schedule, command = command or "echo YAY" },
    }
  end

  local function phase(name)
    local at = env:get("At", name)
    return at and at.status and at.status.phase
  end

  local function reasons(obj)
    local out = {}
    for _, e in ipairs(env:events(obj)) do out[#out + 1] = e.type .. " " .. e.reason end
    return out
  end

  it("is PENDING until its schedule, RUNNING with a busybox Pod of the command it controls, DONE when the Pod succeeds", function()
    env:create(new_at("a", "2026-11-25T11:00:00Z", "echo hello  world"))
    assert.are.equal("PENDING", phase("a"))
    env:advance(3599)
    assert.are.equal("PENDING", phase("a"))
    assert.is_nil(env:get("Pod", "a-pod"))
    env:advance(1) -- the schedule: at once, not at the next resync
    assert.are.equal("RUNNING", phase("a"))
    local pod = env:get("Pod", "a-pod")
    local c = pod.spec.containers[1]
    assert.are.same({ "echo", "hello", "world" }, c.command)
    assert.are.equal("busybox", c.image)
    assert.are.equal("OnFailure", pod.spec.restartPolicy)
    local at = env:get("At", "a")
    local ref = pod.metadata.ownerReferences[1]
    assert.are.same({ GROUP, "At", "a", at.metadata.uid, true, true },
      { ref.apiVersion, ref.kind, ref.name, ref.uid, ref.controller, ref.blockOwnerDeletion })
    -- the kubelet reports the Pod done
    pod.status = { phase = "Succeeded" }
    assert(env:update_status(pod))
    assert.are.equal("DONE", phase("a"))
    assert.are.same({ "Normal Scheduled", "Normal PodCreated", "Normal Done" }, reasons(at))
  end)

  it("keeps a Ready condition beside the phase: False (Pending, then Running) since it was made, True (Done) " ..
    "once its Pod ran, since then, with the At's generation", function()
    env:create(new_at("r", "2026-11-25T11:00:00Z"))
    local at = env:get("At", "r")
    local ready = luaop.conditions.get(at, "Ready")
    assert.are.same({ "False", "Pending", "2026-11-25T10:00:00Z", at.metadata.generation },
      { ready.status, ready.reason, ready.lastTransitionTime, ready.observedGeneration })
    env:advance(3600)
    ready = luaop.conditions.get(env:get("At", "r"), "Ready")
    assert.are.same({ "False", "Running", "2026-11-25T10:00:00Z" }, { ready.status, ready.reason, ready.lastTransitionTime })
    env:advance(30)
    local pod = env:get("Pod", "r-pod")
    pod.status = { phase = "Succeeded" }
    assert(env:update_status(pod))
    at = env:get("At", "r")
    assert.is_true(luaop.conditions.is_true(at, "Ready"))
    ready = luaop.conditions.get(at, "Ready")
    assert.are.same({ "Done", "2026-11-25T11:00:30Z", "" }, { ready.reason, ready.lastTransitionTime, ready.message })
    assert.are.equal(1, #at.status.conditions)
    -- a schedule that is no real time: Ready False, Failed, with the reason in its message
    env:create(new_at("f", "2026-02-30T10:00:00Z"))
    ready = luaop.conditions.get(env:get("At", "f"), "Ready")
    assert.are.same({ "False", "Failed" }, { ready.status, ready.reason })
    assert.matches("^spec.schedule: ", ready.message)
  end)

  it("writes exactly what the contract needs: three status writes and one Pod", function()
    env:create(new_at("w", "2026-11-25T09:00:00Z")) -- past: runs at once
    local pod = env:get("Pod", "w-pod")
    pod.status = { phase = "Failed" }
    assert(env:update_status(pod))
    assert.are.equal("DONE", phase("w"))
    local writes = {}
    for _, a in ipairs(env:actions()) do
      if a.kind ~= "Event" then writes[#writes + 1] = a.verb .. " " .. a.kind .. (a.subresource and "/" .. a.subresource or "") end
    end
    assert.are.same({ "update At/status", "update At/status", "create Pod", "update At/status" }, writes)
  end)

  it("fails an At whose schedule is no real time, once, with status.message and a Warning, and does not retry it", function()
    env:create(new_at("bad", "2026-02-30T10:00:00Z"))
    local at = env:get("At", "bad")
    assert.are.equal("FAILED", at.status.phase)
    assert.matches("spec.schedule: .*day 30 is out of range", at.status.message)
    assert.are.same({ "Normal Scheduled", "Warning InvalidSchedule" }, reasons(at))
    env:clear_actions()
    env:advance(3600)
    assert.are.same({}, env:actions())
  end)

  it("retries a Conflict on its status from fresh state, quietly, and gets there", function()
    env:fail { verb = "update", kind = "At", subresource = "status", reason = "Conflict", times = 2 }
    env:create(new_at("c", "2026-11-25T09:00:00Z"))
    env:advance(1) -- the backoff: 5 ms, then 10 ms
    assert.are.equal("RUNNING", phase("c"))
    assert.is_not_nil(env:get("Pod", "c-pod"))
    local injected = 0
    for _, a in ipairs(env:actions { verb = "update" }) do
      if a.injected then injected = injected + 1 end
    end
    assert.are.equal(2, injected)
    -- quietly: a debug line with the reason each time, no error, no traceback
    assert.are.same({}, env:logs { level = "error" })
    local conflicts = env:logs { level = "debug", msg = "^Reconcile conflict" }
    assert.are.equal(2, #conflicts)
    assert.are.equal("Conflict", conflicts[1].fields.reason)
  end)

  it("leaves a Pod of another At of the same name alone until it goes, then makes its own", function()
    local other = env:create(new_at("old", "2030-01-01T00:00:00Z"))
    assert(env:create {
      apiVersion = "v1", kind = "Pod", metadata = { name = "x-pod", namespace = "default",
        ownerReferences = { { apiVersion = GROUP, kind = "At", name = "x", uid = other.metadata.uid, controller = true } } },
      spec = { containers = { { name = "c", image = "busybox" } } },
    })
    env:create(new_at("x", "2026-11-25T09:00:00Z"))
    env:advance(60)
    assert.are.equal("RUNNING", phase("x"))
    assert.are.equal(other.metadata.uid, env:get("Pod", "x-pod").metadata.ownerReferences[1].uid)
    assert(env:delete("Pod", { namespace = "default", name = "x-pod" }))
    env:advance(120) -- the next retry, with backoff
    local at = env:get("At", "x")
    assert.are.equal(at.metadata.uid, env:get("Pod", "x-pod").metadata.ownerReferences[1].uid)
  end)

  it("takes its Pod with it when deleted (the garbage collector, through the controller reference)", function()
    env:create(new_at("d", "2026-11-25T09:00:00Z"))
    assert.is_not_nil(env:get("Pod", "d-pod"))
    assert(env:delete("At", { namespace = "default", name = "d" }))
    assert.is_nil(env:get("Pod", "d-pod"))
    assert.are.same({}, env:actions { verb = "create", kind = "At" })
  end)
end)
