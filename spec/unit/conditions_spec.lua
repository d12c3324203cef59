-- luaop.conditions (luaop.conditions): status.conditions kept as
-- apimachinery's meta.SetStatusCondition, RemoveStatusCondition,
-- FindStatusCondition and IsStatusConditionTrue/False keep them; on
-- luaop's clock (the kit's virtual one here, so times are exact).
local core = require "luaop.core"
local conditions = require "luaop.conditions"
local testing = require "luaop.testing"
local proc = require "support.proc"
local kit = require "support.kit"

local json = core.json
local T = 1800000000 -- 2027-01-15T08:00:00Z
local STAMP = "2027-01-15T08:00:00Z"

local function ready(fields)
  local c = { type = "Ready", status = "True", reason = "Reconciled", message = "all good" }
  for k, v in pairs(fields or {}) do c[k] = v end
  return c
end

-- An object whose status.conditions is decoded from JSON, as read from the API server.
local function decoded(list_json, generation)
  return json.decode(('{"metadata": {"name": "w", "generation": %d}, "status": {"conditions": %s}}'):format(
    generation or 1, list_json))
end

describe("luaop.conditions", function()
  before_each(function() core.kit.virtual_clock(T) end)
  after_each(function() core.kit.real_clock() end)

  it("appends a new condition with lastTransitionTime now, making status and the list (a JSON array), changed", function()
    local obj = { metadata = { name = "w", generation = 3 } }
    assert.is_true(conditions.set(obj, ready()))
    assert.are.same({ { type = "Ready", status = "True", reason = "Reconciled", message = "all good",
      observedGeneration = 3, lastTransitionTime = STAMP } }, obj.status.conditions)
    assert.is_true(json.is_array(obj.status.conditions))
    -- the message is written even when empty (it is required), observedGeneration never as 0
    local other = { metadata = {}, status = { phase = "x" } }
    assert.is_true(conditions.set(other, { type = "example.com/Synced", status = "Unknown", reason = "Pending" }))
    assert.are.equal('{"metadata":{},"status":{"conditions":[{"lastTransitionTime":"' .. STAMP .. '","message":"",'
      .. '"reason":"Pending","status":"Unknown","type":"example.com/Synced"}],"phase":"x"}}', json.encode(other))
    -- a second type is appended after the first
    assert.is_true(conditions.set(obj, ready { type = "Synced" }))
    assert.are.same({ "Ready", "Synced" }, { obj.status.conditions[1].type, obj.status.conditions[2].type })
  end)

  it("uses a given lastTransitionTime for a new condition, written as metav1.Time writes it (UTC, whole seconds)", function()
    local obj = { metadata = {} }
    conditions.set(obj, ready { lastTransitionTime = "2026-01-01T12:00:00.75+02:00" })
    assert.are.equal("2026-01-01T10:00:00Z", conditions.get(obj, "Ready").lastTransitionTime)
    conditions.set(obj, ready { type = "Synced", lastTransitionTime = T - 60.5 })
    assert.are.equal("2027-01-15T07:58:59Z", conditions.get(obj, "Synced").lastTransitionTime)
  end)

  it("moves lastTransitionTime only when the status changes: to now, or to the time given", function()
    local obj = { metadata = { generation = 1 } }
    conditions.set(obj, ready())
    core.kit.advance(60)
    assert.is_false(conditions.set(obj, ready()))
    assert.are.equal(STAMP, conditions.get(obj, "Ready").lastTransitionTime)
    -- a time given with an unchanged status is not used
    assert.is_false(conditions.set(obj, ready { lastTransitionTime = "2020-01-01T00:00:00Z" }))
    assert.are.equal(STAMP, conditions.get(obj, "Ready").lastTransitionTime)
    assert.is_true(conditions.set(obj, ready { status = "False" }))
    assert.are.equal("2027-01-15T08:01:00Z", conditions.get(obj, "Ready").lastTransitionTime)
    assert.are.equal("False", conditions.get(obj, "Ready").status)
    core.kit.advance(60)
    assert.is_true(conditions.set(obj, ready { status = "Unknown", lastTransitionTime = "2020-01-01T00:00:00Z" }))
    assert.are.equal("2020-01-01T00:00:00Z", conditions.get(obj, "Ready").lastTransitionTime)
  end)

  it("updates reason, message and observedGeneration each on its own, changed, lastTransitionTime untouched", function()
    local obj = { metadata = { generation = 1 } }
    conditions.set(obj, ready())
    core.kit.advance(30)
    local c = conditions.get(obj, "Ready")
    assert.is_true(conditions.set(obj, ready { reason = "Rolled" }))
    assert.are.same({ "Rolled", "all good", 1 }, { c.reason, c.message, c.observedGeneration })
    assert.is_true(conditions.set(obj, ready { reason = "Rolled", message = "better" }))
    assert.are.same({ "Rolled", "better", 1 }, { c.reason, c.message, c.observedGeneration })
    obj.metadata.generation = 2
    assert.is_true(conditions.set(obj, ready { reason = "Rolled", message = "better" }))
    assert.are.same({ "Rolled", "better", 2 }, { c.reason, c.message, c.observedGeneration })
    assert.is_true(conditions.set(obj, ready { reason = "Rolled", message = "better", observedGeneration = 0 }))
    assert.is_nil(c.observedGeneration) -- (0: omitted, as metav1.Condition's omitempty)
    assert.are.same({ "True", STAMP }, { c.status, c.lastTransitionTime })
    assert.are.equal(1, #obj.status.conditions)
  end)

  it("changes nothing and says so when the same condition is set again, an absent message and observedGeneration as empty and 0", function()
    local obj = decoded('[{"type": "Ready", "status": "False", "reason": "Waiting", '
      .. '"lastTransitionTime": "2026-05-01T00:00:00Z"}]', 0)
    local before = json.encode(obj)
    assert.is_false(conditions.set(obj, { type = "Ready", status = "False", reason = "Waiting" }))
    assert.are.equal(before, json.encode(obj))
    obj = decoded('[{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "all good", '
      .. '"observedGeneration": 4, "lastTransitionTime": "2026-05-01T00:00:00Z"}]', 4)
    before = json.encode(obj)
    assert.is_false(conditions.set(obj, ready()))
    assert.are.equal(before, json.encode(obj))
  end)

  it("takes observedGeneration from metadata.generation unless given", function()
    local obj = { metadata = { generation = 7 } }
    conditions.set(obj, ready())
    assert.are.equal(7, conditions.get(obj, "Ready").observedGeneration)
    conditions.set(obj, ready { type = "Synced", observedGeneration = 5 })
    assert.are.equal(5, conditions.get(obj, "Synced").observedGeneration)
    conditions.set(obj, ready { type = "Other", observedGeneration = 6.0 })
    assert.are.equal("integer", math.type(conditions.get(obj, "Other").observedGeneration))
    local none = { metadata = {} }
    conditions.set(none, ready())
    assert.is_nil(conditions.get(none, "Ready").observedGeneration)
  end)

  it("removes every condition of a type, keeps the others in order, and leaves [] when none is left", function()
    local obj = decoded('[{"type": "A", "status": "True"}, {"type": "Ready", "status": "True"}, '
      .. '{"type": "B", "status": "False"}, {"type": "Ready", "status": "False"}]')
    assert.is_true(conditions.remove(obj, "Ready"))
    assert.are.same({ "A", "B" }, { obj.status.conditions[1].type, obj.status.conditions[2].type })
    assert.are.equal(2, #obj.status.conditions)
    assert.is_false(conditions.remove(obj, "Ready"))
    assert.is_true(conditions.remove(obj, "A"))
    assert.is_true(conditions.remove(obj, "B"))
    assert.are.equal('{"conditions":[]}', json.encode(obj.status))
    -- a list the script made as a plain table stays a list too
    local mine = { status = { conditions = { { type = "A", status = "True" } } } }
    assert.is_true(conditions.remove(mine, "A"))
    assert.are.equal('{"conditions":[]}', json.encode(mine.status))
    -- nothing to remove from: no status, no list, JSON null
    assert.is_false(conditions.remove({}, "A"))
    assert.is_false(conditions.remove({ status = {} }, "A"))
    assert.is_false(conditions.remove({ status = { conditions = json.null } }, "A"))
  end)

  it("gets the first condition of a type, the table in the list itself, or nil", function()
    local obj = decoded('[{"type": "A", "status": "True"}, {"type": "Ready", "status": "True", "reason": "One"}, '
      .. '{"type": "Ready", "status": "False", "reason": "Two"}]')
    local c = conditions.get(obj, "Ready")
    assert.are.equal("One", c.reason)
    assert.are.equal(obj.status.conditions[2], c)
    assert.is_nil(conditions.get(obj, "Missing"))
    assert.is_nil(conditions.get({}, "Ready"))
    assert.is_nil(conditions.get({ status = json.null }, "Ready"))
  end)

  it("is true (false) only for a condition present with status True (False)", function()
    local obj = decoded('[{"type": "T", "status": "True"}, {"type": "F", "status": "False"}, '
      .. '{"type": "U", "status": "Unknown"}, {"type": "T", "status": "False"}]')
    assert.are.same({ true, false, false, false }, { conditions.is_true(obj, "T"), conditions.is_true(obj, "F"),
      conditions.is_true(obj, "U"), conditions.is_true(obj, "Missing") })
    assert.are.same({ false, true, false, false }, { conditions.is_false(obj, "T"), conditions.is_false(obj, "F"),
      conditions.is_false(obj, "U"), conditions.is_false(obj, "Missing") })
    assert.is_false(conditions.is_true({}, "T"))
    assert.is_false(conditions.is_false({ metadata = {} }, "F"))
  end)

  it("refuses a malformed condition or object at the caller's line, saying what is wrong, and changes nothing", function()
    local function refused(f, ...)
      local args = table.pack(...)
      local line = debug.getinfo(1, "l").currentline + 1
      local ok, err = pcall(function() f(table.unpack(args, 1, args.n)) end)
      assert.is_false(ok)
      assert.are.equal(("conditions_spec.lua:%d:"):format(line), err:match("([^/]+:%d+:)"))
      return err
    end
    local obj = { metadata = { generation = 1 } }
    local function set_refused(c) return refused(conditions.set, obj, c) end
    assert.matches('type is required: a string such as "Ready", got nil',
      set_refused { status = "True", reason = "Reconciled" }, 1, true)
    assert.matches('type is required: a string such as "Ready", got the string ""', set_refused(ready { type = "" }), 1, true)
    assert.matches('conditions.set(obj, condition): type must be a name', set_refused(ready { type = "Not ready" }), 1, true)
    assert.matches("prefix", set_refused(ready { type = "Example.com/Ready" }), 1, true)
    assert.matches("prefix", set_refused(ready { type = "/Ready" }), 1, true)
    assert.matches("type must be a name", set_refused(ready { type = "a/b/c" }), 1, true)
    assert.matches("type must be a name", set_refused(ready { type = ("x"):rep(64) }), 1, true)
    assert.matches("at most 316 bytes", set_refused(ready { type = ("a"):rep(253) .. "/" .. ("B"):rep(63) }), 1, true)
    assert.matches('status must be "True", "False" or "Unknown", got the boolean true',
      set_refused(ready { status = true }), 1, true)
    assert.matches('got the string "true"', set_refused(ready { status = "true" }), 1, true)
    assert.matches('reason must be one CamelCase word', set_refused(ready { reason = "not ready" }), 1, true)
    assert.matches('reason must be one CamelCase word', set_refused(ready { reason = "Trailing:" }), 1, true)
    assert.matches('reason must be one CamelCase word', set_refused(ready { reason = "9Lives" }), 1, true)
    assert.matches('reason is required', set_refused(ready { reason = false }), 1, true)
    assert.matches('reason must be at most 1024 bytes', set_refused(ready { reason = ("A"):rep(1025) }), 1, true)
    assert.matches('message must be a string, got the number 3', set_refused(ready { message = 3 }), 1, true)
    assert.matches('message must be at most 32768 bytes', set_refused(ready { message = ("m"):rep(32769) }), 1, true)
    assert.matches('observedGeneration must be an integer >= 0, got the number -1',
      set_refused(ready { observedGeneration = -1 }), 1, true)
    assert.matches('observedGeneration must be an integer >= 0, got the number 1.5',
      set_refused(ready { observedGeneration = 1.5 }), 1, true)
    assert.matches('lastTransitionTime: "yesterday" is not an RFC 3339 time',
      set_refused(ready { lastTransitionTime = "yesterday" }), 1, true)
    assert.matches('lastTransitionTime: a time must be', set_refused(ready { lastTransitionTime = 0 / 0 }), 1, true)
    assert.matches('a field a metav1.Condition does not: "observed_generation" (did you mean observedGeneration?)',
      set_refused(ready { observed_generation = 2 }), 1, true)
    assert.matches('the condition must be a table', set_refused("Ready"), 1, true)
    assert.matches('metadata.generation must be an integer >= 0, got the string "2"',
      refused(conditions.set, { metadata = { generation = "2" } }, ready()), 1, true)
    assert.is_nil(obj.status) -- nothing was made on the way
    assert.matches('obj must be an object (a table), got nil', refused(conditions.set, nil, ready()), 1, true)
    assert.matches('obj.status must be a table, got the string "ok"',
      refused(conditions.set, { status = "ok" }, ready()), 1, true)
    assert.matches('obj.status.conditions must be a list, got the boolean true',
      refused(conditions.get, { status = { conditions = true } }, "Ready"), 1, true)
    assert.matches('conditions.get(obj, type): type must be a string, got nil', refused(conditions.get, obj), 1, true)
    assert.matches('conditions.remove(obj, type): type must be a string', refused(conditions.remove, obj, 1), 1, true)
    assert.matches('conditions.is_true(obj, type): obj must be an object', refused(conditions.is_true, "x", "A"), 1, true)
    assert.matches('conditions.is_false(obj, type): type must be a string', refused(conditions.is_false, obj, {}), 1, true)
    -- the longest of each is taken
    assert.is_true(conditions.set(obj, ready { type = ("a"):rep(252) .. "/" .. ("B"):rep(63),
      reason = ("A"):rep(1024), message = ("m"):rep(32768) }))
  end)
end)

local CRD = {
  apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
  metadata = { name = "widgets.example.com" },
  spec = {
    group = "example.com", scope = "Namespaced",
    names = { kind = "Widget", listKind = "WidgetList", plural = "widgets", singular = "widget" },
    versions = { { name = "v1", served = true, storage = true, subresources = { status = {} } } },
  },
}

-- A controller that says in a Ready condition whether its Widget's spec is ready.
local SCRIPT = [[
local luaop = require "luaop"
return luaop.controller {
  name = "widgets", resource = "example.com/v1/Widget",
  reconcile = function(ctx, req)
    local w = ctx:get("example.com/v1/Widget", req)
    if not w then return end
    local ok = w.spec and w.spec.ready
    if luaop.conditions.set(w, { type = "Ready", status = ok and "True" or "False",
        reason = ok and "WidgetReady" or "Waiting", message = ok and "ready" or "waiting for spec.ready" }) then
      assert(ctx:update_status(w))
    end
  end,
}
]]

describe("luaop.conditions under the test kit", function()
  local w = kit.per_test(before_each, after_each)

  it("moves lastTransitionTime with the kit's clock and a status change; setting the same condition again writes nothing",
    function()
    w.env = testing.env { script = proc.write(w.dir, "widgets.lua", SCRIPT), objects = { CRD },
      time = "2027-01-15T08:00:00Z" }
    local env = w.env
    assert(env:create { apiVersion = "example.com/v1", kind = "Widget",
      metadata = { name = "a", namespace = "default" }, spec = { ready = false } })
    local c = conditions.get(env:get("example.com/v1/Widget", "a"), "Ready")
    assert.are.same({ type = "Ready", status = "False", reason = "Waiting", message = "waiting for spec.ready",
      observedGeneration = 1, lastTransitionTime = "2027-01-15T08:00:00Z" }, c)
    -- its own status write queued it again: that reconcile set the same condition and wrote nothing
    assert.are.equal(1, #env:actions { verb = "update", subresource = "status" })
    env:clear_actions()
    env:advance("10m")
    -- a change that is not the status (a label) reconciles, and writes nothing
    assert(env:patch("example.com/v1/Widget", "a", { metadata = { labels = { seen = "yes" } } }))
    assert.are.same({}, env:actions())
    -- the spec changes: the status moves, and lastTransitionTime with it, to the kit's now
    assert(env:patch("example.com/v1/Widget", "a", { spec = { ready = true } }))
    c = conditions.get(env:get("example.com/v1/Widget", "a"), "Ready")
    assert.are.same({ type = "Ready", status = "True", reason = "WidgetReady", message = "ready",
      observedGeneration = 2, lastTransitionTime = "2027-01-15T08:10:00Z" }, c)
    assert.are.equal(1, #env:actions())
    assert.are.equal(1, #env:actions { verb = "update", subresource = "status" })
  end)
end)
