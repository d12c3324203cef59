-- A definition's finalizer and finalize (luaop.finalizer), with the test
-- kit: added before reconcile, finalize instead of reconcile once the
-- object is being deleted, the finalizer removed after it, retried when it
-- raises; load errors at the field's line.
local testing = require "luaop.testing"
local proc = require "support.proc"
local kit = require "support.kit"

local write, cm = proc.write, kit.cm

local F = "test.example.com/cleanup"
local OTHER = "other.example.com/keep"

-- A script whose reconcile and finalize log what they saw; finalize runs
-- `body` first (Lua text, with ctx and obj; `calls` counts its calls).
local function script(body, extra)
  return ([[
local luaop = require "luaop"
local calls = 0
return luaop.controller { name = "fin", resource = "v1/ConfigMap", %s
  finalizer = "%s",
  finalize = function(ctx, obj)
    calls = calls + 1
    %s
    ctx.log:info("finalize", { name = obj.metadata.name, calls = calls,
      deleting = obj.metadata.deletionTimestamp ~= nil })
  end,
  reconcile = function(ctx, req)
    local obj = ctx:get("v1/ConfigMap", req)
    local has = false
    for _, f in ipairs(obj and obj.metadata.finalizers or {}) do has = has or f == "%s" end
    ctx.log:info("reconcile", { name = req.name, present = obj ~= nil, has = has,
      deleting = obj ~= nil and obj.metadata.deletionTimestamp ~= nil })
  end }
]]):format(extra or "", F, body or "", F)
end

local function with_finalizers(name, fins)
  local o = cm(name)
  o.metadata.finalizers = fins
  return o
end

describe("a controller's finalizer", function()
  local t = kit.per_test(before_each, after_each)

  local function env(body, extra, objects)
    t.env = testing.env { script = write(t.dir, "fin.lua", script(body, extra)), objects = objects }
    return t.env
  end

  local function logged(msg, name)
    local out = {}
    for _, l in ipairs(t.env:logs { msg = "^" .. msg .. "$" }) do
      if l.fields.name == name then out[#out + 1] = l.fields end
    end
    return out
  end

  it("is added before reconcile runs, after others' finalizers, and never twice", function()
    local e = env()
    assert(e:create(with_finalizers("a", { OTHER })))
    assert.are.same({ OTHER, F }, e:get("ConfigMap", "a").metadata.finalizers)
    -- the first reconcile already saw it
    local seen = logged("reconcile", "a")
    assert.is_true(#seen >= 1)
    for _, s in ipairs(seen) do assert.is_true(s.has) end
    -- a change, a reconcile: not added again
    local obj = e:get("ConfigMap", "a")
    obj.data = { k = "v" }
    assert(e:update(obj))
    assert.is_true(#logged("reconcile", "a") > #seen)
    assert.are.same({ OTHER, F }, e:get("ConfigMap", "a").metadata.finalizers)
    assert.are.equal(1, #e:actions { verb = "update", kind = "ConfigMap", name = "a" })
  end)

  it("calls finalize, not reconcile, for an object being deleted, then removes only its own finalizer", function()
    local e = env()
    assert(e:create(with_finalizers("a", { OTHER })))
    local before = #logged("reconcile", "a")
    assert(e:delete("ConfigMap", "a"))
    local fin = logged("finalize", "a")
    assert.are.equal(1, #fin)
    assert.is_true(fin[1].deleting)
    assert.are.equal(before, #logged("reconcile", "a")) -- reconcile was not called for it
    local obj = e:get("ConfigMap", "a") -- still there: the other finalizer holds it
    assert.is_string(obj.metadata.deletionTimestamp)
    assert.are.same({ OTHER }, obj.metadata.finalizers)
    -- its owner lets it go: gone, and reconciled as gone
    obj.metadata.finalizers = {}
    assert(e:update(obj))
    assert.is_nil(e:get("ConfigMap", "a"))
    assert.are.equal(1, #logged("finalize", "a"))
    local last = logged("reconcile", "a")
    assert.is_false(last[#last].present)
  end)

  it("lets an object with only its finalizer go once finalize returned", function()
    local e = env()
    assert(e:create(cm("a")))
    assert.are.same({ F }, e:get("ConfigMap", "a").metadata.finalizers)
    assert(e:delete("ConfigMap", "a"))
    assert.are.equal(1, #logged("finalize", "a"))
    assert.is_nil(e:get("ConfigMap", "a"))
  end)

  it("keeps the finalizer and retries finalize with the key's backoff when it raises, logged with its traceback "
    .. "and a Warning Event", function()
    local e = env([[if calls <= 2 then error("not yet: " .. calls) end]])
    assert(e:create(cm("a")))
    assert(e:delete("ConfigMap", "a"))
    local obj = e:get("ConfigMap", "a")
    assert.are.same({ F }, obj.metadata.finalizers) -- kept while finalize fails
    assert.are.same({}, logged("finalize", "a"))
    local errs = e:logs { msg = "^Reconciler error$" }
    assert.is_true(#errs >= 1)
    assert.matches("fin%.lua:%d+: not yet: 1", errs[1].fields.error)
    assert.matches("stack traceback", errs[1].fields.error)
    local ev = e:events(obj)
    assert.are.equal("Warning", ev[#ev].type)
    assert.are.equal("ReconcileError", ev[#ev].reason)
    assert.matches("not yet: 1", ev[#ev].note)
    -- the backoff: 5 ms, then 10 ms
    e:advance(1)
    assert.are.same({ { namespace = "default", name = "a", calls = 3, deleting = true } }, logged("finalize", "a"))
    assert.is_nil(e:get("ConfigMap", "a"))
  end)

  it("keeps the finalizer when finalize asks to be called again (requeue_after), and calls it then", function()
    local e = env([[if calls == 1 then return luaop.requeue_after(30) end]])
    assert(e:create(cm("a")))
    assert(e:delete("ConfigMap", "a"))
    assert.are.same({ F }, e:get("ConfigMap", "a").metadata.finalizers)
    e:advance(29)
    assert.is_not_nil(e:get("ConfigMap", "a"))
    e:advance(2)
    assert.is_nil(e:get("ConfigMap", "a"))
  end)

  it("keeps the finalizer and stops retrying finalize on a terminal error, until the object's next event", function()
    local e = env([[if calls == 1 then error(luaop.terminal("cannot clean up")) end]])
    assert(e:create(cm("a")))
    assert(e:delete("ConfigMap", "a"))
    e:advance(60)
    local obj = e:get("ConfigMap", "a")
    assert.are.same({ F }, obj.metadata.finalizers)
    assert.are.same({}, logged("finalize", "a"))
    local ev = e:events(obj)
    assert.are.equal("TerminalError", ev[#ev].reason)
    -- the next event of the object runs it again
    obj.metadata.labels = { again = "yes" }
    assert(e:update(obj))
    assert.are.equal(1, #logged("finalize", "a"))
    assert.is_nil(e:get("ConfigMap", "a"))
  end)

  it("runs finalize under the reconcile's budgets", function()
    local e = env([[if calls == 1 then while true do end end]], "instructions = 100000,")
    assert(e:create(cm("a")))
    assert(e:delete("ConfigMap", "a"))
    local obj = e:get("ConfigMap", "a")
    assert.are.same({ F }, obj.metadata.finalizers)
    local ev = e:events(obj)
    assert.are.equal("BudgetExceeded", ev[#ev].reason)
    e:advance(1)
    assert.is_nil(e:get("ConfigMap", "a"))
  end)

  it("is never given to an object already being deleted, and such an object is not reconciled", function()
    local o = with_finalizers("a", { OTHER })
    o.metadata.deletionTimestamp = "2029-12-31T23:00:00Z"
    local e = env(nil, nil, { o })
    assert.are.same({ OTHER }, e:get("ConfigMap", "a").metadata.finalizers)
    assert.are.same({}, e:actions { verb = "update", kind = "ConfigMap" })
    assert.are.same({}, logged("reconcile", "a"))
    assert.are.same({}, logged("finalize", "a"))
  end)

  it("removes itself with a write that fails with Conflict rather than drop a change made meanwhile", function()
    -- the first finalize changes a label behind the caches' back (the raw
    -- client's writes are not read back into them): the removal, from the
    -- cached object, would undo it
    local e = env([[
    if calls == 1 then
      assert(luaop.client():patch("v1/ConfigMap", obj.metadata.name,
        { metadata = { labels = { touched = "yes" } } }, { namespace = obj.metadata.namespace }))
    end]])
    assert(e:create(with_finalizers("a", { OTHER })))
    assert(e:delete("ConfigMap", "a"))
    e:advance(1)
    local obj = e:get("ConfigMap", "a")
    assert.are.same({ OTHER }, obj.metadata.finalizers)
    assert.are.equal("yes", obj.metadata.labels.touched)
    assert.are.equal(2, #logged("finalize", "a"))
    local refused = 0
    for _, a in ipairs(e:actions { verb = "update", kind = "ConfigMap", name = "a" }) do
      if a.code == 409 then refused = refused + 1 end
    end
    assert.are.equal(1, refused)
  end)

  local function labelled(name, fins)
    local o = with_finalizers(name, fins)
    o.metadata.labels = { keep = "yes" }
    return o
  end

  it("is taken off an object that leaves the controller's label selector, without finalize, so a delete lets it go",
    function()
    local e = env(nil, [[label_selector = "keep=yes",]])
    assert(e:create(labelled("a")))
    assert.are.same({ F }, e:get("ConfigMap", "a").metadata.finalizers)
    assert(e:patch("ConfigMap", "a", { metadata = { labels = { keep = "no" } } }))
    assert.are.same({}, e:get("ConfigMap", "a").metadata.finalizers)
    assert(e:delete("ConfigMap", "a"))
    assert.is_nil(e:get("ConfigMap", "a"))
    assert.are.same({}, logged("finalize", "a"))
    -- labelled again: the controller's again
    assert(e:create(labelled("b")))
    assert(e:patch("ConfigMap", "b", { metadata = { labels = { keep = "no" } } }))
    assert(e:patch("ConfigMap", "b", { metadata = { labels = { keep = "yes" } } }))
    assert.are.same({ F }, e:get("ConfigMap", "b").metadata.finalizers)
  end)

  it("stays on an object its selector still selects that the controller's cache has not seen yet", function()
    local e = env(nil, [[label_selector = "keep=yes",
      watches = { { "v1/Secret", map = function(s) return { namespace = s.metadata.namespace, name = s.metadata.name } end } },]])
    e:hold_watches("configmaps")
    assert(e:create(labelled("a", { F })))
    assert(e:create { apiVersion = "v1", kind = "Secret", metadata = { name = "a", namespace = "default" } })
    assert.is_true(#logged("reconcile", "a") >= 1) -- reconciled while its cache had not seen it
    assert.are.same({ F }, e:get("ConfigMap", "a").metadata.finalizers)
    e:release_watches()
    assert.are.same({ F }, e:get("ConfigMap", "a").metadata.finalizers)
  end)
end)

describe("a refused finalizer", function()
  local t = kit.per_test(before_each, after_each)

  -- the error testing.env raises for the script text, and --check's findings
  local function refused(text)
    local path = write(t.dir, "op.lua", text)
    local ok, err = pcall(testing.env, { script = path })
    assert.is_false(ok)
    local _, out = proc.run { "build/luaop", "--check", path }
    return tostring(err), out, path
  end

  it("is one without finalize, or finalize without one, at the field's line, in the kit and in --check", function()
    local err, out, path = refused [[
local luaop = require "luaop"
return luaop.controller {
  name = "half",
  resource = "v1/ConfigMap",
  finalizer = "example.com/cleanup",
  reconcile = function() end,
}
]]
    local want = path .. ":5: controller half: finalizer needs a finalize = function(ctx, obj) beside it"
    assert.are.equal(want, err)
    assert.matches(want:gsub("%p", "%%%0"), out)
    err, out, path = refused [[
local luaop = require "luaop"
return luaop.controller {
  name = "half",
  resource = "v1/ConfigMap",
  reconcile = function() end,
  finalize = function() end,
}
]]
    want = path .. ":6: controller half: finalize needs a finalizer = \"example.com/name\" beside it"
    assert.are.equal(want, err)
    assert.matches(want:gsub("%p", "%%%0"), out)
  end)

  it("is a name that is not a qualified name with a domain prefix, at its line", function()
    for _, bad in ipairs { "cleanup", "/cleanup", "Example.com/cleanup", "example.com/", "a/b/c",
      "example.com/-x", "example..com/x", ("x"):rep(64) .. ".com/y", "example.com/" .. ("y"):rep(64) } do
      local err, out, path = refused(([[
local luaop = require "luaop"
return luaop.controller {
  name = "bad",
  resource = "v1/ConfigMap",
  reconcile = function() end,

  finalizer = %q,
  finalize = function() end,
}
]]):format(bad))
      local at = (path .. ":7: controller bad: finalizer must be "):gsub("%p", "%%%0")
      assert.matches("^" .. at, err)
      assert.matches(at, out)
    end
  end)

  it("accepts Kubernetes' qualified names", function()
    local finalizer = require "luaop.finalizer"
    for _, good in ipairs { "example.com/cleanup", "secretsync.k8s.ziwon.dev/copies", "a/b", "x.io/My_Name.2",
      ("a"):rep(63) .. "." .. ("b"):rep(63) .. "/" .. ("c"):rep(63) } do
      assert.is_nil(finalizer.bad_name(good), good)
    end
  end)

  it("needs a reconcile, not handlers", function()
    local err = refused [[
local luaop = require "luaop"
return luaop.controller {
  name = "h",
  resource = "v1/ConfigMap",
  on_add = function() end,
  finalizer = "example.com/cleanup",
  finalize = function() end,
}
]]
    assert.matches(":6: controller h: a finalizer needs a reconcile %(not handlers%)", err)
  end)
end)
