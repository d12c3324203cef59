-- What a reconcile context, handlers and the reconcile's result give a
-- script, and what they keep from it (found by an adversarial review of
-- this session's API), with the test kit: several scripts side by side.
local testing = require "luaop.testing"
local proc = require "support.proc"
local kit = require "support.kit"

local write = proc.write

local cm = kit.cm

describe("a reconcile context", function()
  local t = kit.per_test(before_each, after_each)

  it("hands a script nothing of the runtime's: no manager, shared client or controller to reach others through", function()
    t.env = testing.env { script = write(t.dir, "peek.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "peek", resource = "v1/ConfigMap",
  reconcile = function(ctx, req)
    local seen = {}
    for k in pairs(ctx) do seen[#seen + 1] = tostring(k) end
    table.sort(seen)
    ctx.log:info("fields", { fields = table.concat(seen, ","), manager = ctx.manager == nil,
      client = ctx.client == nil, controller = ctx.controller == nil })
  end }
]]) }
    t.env:create(cm("a"))
    local line = t.env:logs { msg = "^fields$" }[1]
    assert.are.same({ "log", true, true, true },
      { line.fields.fields, line.fields.manager, line.fields.client, line.fields.controller })
  end)

  it("deletes nothing from the caches when the API server never answered for that object (an apiVersion it does not serve)", function()
    t.env = testing.env { scripts = {
      write(t.dir, "watch.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "watch", resource = "v1/ConfigMap",
  reconcile = function(ctx, req)
    ctx.log:info("present", { name = req.name, here = ctx:get("ConfigMap", req) ~= nil })
  end }
]]),
      write(t.dir, "typo.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "typo", resource = "v1/Secret",
  reconcile = function(ctx, req)
    local ok, err = ctx:delete { apiVersion = "bogus.example.com/v1", kind = "ConfigMap",
      metadata = { namespace = "default", name = "victim" } }
    ctx.log:info("typo delete", { ok = ok ~= nil, reason = err and err.reason })
  end }
]]) } }
    t.env:create(cm("victim"))
    assert(t.env:create { apiVersion = "v1", kind = "Secret", metadata = { name = "go", namespace = "default" } })
    local d = t.env:logs { msg = "^typo delete$" }[1]
    assert.are.same({ false, "NotFound" }, { d.fields.ok, d.fields.reason })
    local cmv = t.env:get("ConfigMap", "victim")
    cmv.data = { touched = "yes" }
    assert(t.env:update(cmv)) -- its event still reaches the cache: no tombstone
    local present = t.env:logs { msg = "^present$" }
    assert.is_true(present[#present].fields.here)
    assert.are.equal(2, #present)
  end)

  it("puts nothing in the caches for a dry-run create", function()
    t.env = testing.env { script = write(t.dir, "dry.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "dry", resource = "v1/ConfigMap",
  reconcile = function(ctx, req)
    if req.name ~= "go" then ctx.log:info("seen", { name = req.name }) return end
    assert(ctx:create({ apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = "phantom", namespace = "default" } }, { dry_run = true }))
    ctx.log:info("phantom cached", { cached = ctx:get("ConfigMap", "phantom", "default") ~= nil })
  end }
]]) }
    t.env:create(cm("go"))
    assert.is_false(t.env:logs { msg = "^phantom cached$" }[1].fields.cached)
    assert.are.same({}, t.env:logs { msg = "^seen$" })
    assert.is_nil(t.env:get("ConfigMap", "phantom"))
  end)

  it("tells other scripts' handlers of its writes from their own task, not on the writer's budget", function()
    t.env = testing.env { scripts = {
      write(t.dir, "a_writer.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "writer", resource = "v1/ConfigMap", instructions = 1000000,
  reconcile = function(ctx, req)
    if req.name ~= "go" then return end
    assert(ctx:create { apiVersion = "v1", kind = "Secret", metadata = { name = "made", namespace = "default" } })
    ctx.log:info("writer done", {})
  end }
]]),
      write(t.dir, "b_loop.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "loop", resource = "v1/Secret",
  on_add = function(ctx, s) while true do end end }
]]) } }
    t.env:create(cm("go"))
    assert.are.equal(1, #t.env:logs { msg = "^writer done$" })
    assert.are.same({}, t.env:logs { msg = "^Reconciler error$" })
    local failed = t.env:logs { msg = "^event handler failed$" }
    assert.are.equal(1, #failed)
    assert.matches("on_add of loop: .*b_loop%.lua:3: instruction budget", failed[1].fields.error)
  end)

  it("fails a reconcile whose result is not one it can return, saying what it was, and reads it raw", function()
    t.env = testing.env { script = write(t.dir, "ret.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "ret", resource = "v1/ConfigMap",
  reconcile = function(ctx, req)
    if req.name == "string" then return { requeue_after = "soon" } end
    if req.name == "nan" then return { requeue_after = 0 / 0 } end
    if req.name == "meta" then
      return setmetatable({}, { __index = function() while true do end end })
    end
    if req.name == "forever" then return luaop.requeue_after(math.huge) end
    ctx.log:info("fine", { name = req.name })
  end }
]]) }
    for _, name in ipairs { "string", "nan", "meta", "forever", "after" } do t.env:create(cm(name)) end
    t.env:advance(10)
    local errors = {}
    for _, l in ipairs(t.env:logs { msg = "^Reconciler error$" }) do errors[l.fields.name] = l.fields.error end
    assert.matches("requeue_after = string: a number of seconds >= 0", errors.string)
    assert.matches("requeue_after = %-?nan", errors.nan)
    assert.is_nil(errors.meta) -- read raw: its __index never ran (else this spec would not end), an empty result
    assert.is_nil(errors.forever)
    assert.are.equal(1, #t.env:logs { msg = "^fine$" })
  end)
end)

describe("handlers", function()
  it("cannot start a task to wait or write for them", function()
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. dir) end)
    local env = testing.env { script = write(dir, "h.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "h", resource = "v1/ConfigMap",
  on_add = function(ctx, obj)
    luaop.spawn(function() luaop.sleep(1) ctx.log:info("spawned ran", {}) end)
  end }
]]) }
    finally(function() env:stop() end)
    env:create(cm("a"))
    env:advance(5)
    assert.are.same({}, env:logs { msg = "^spawned ran$" })
    assert.matches("luaop.spawn from code that must not wait", env:logs { msg = "^event handler failed$" }[1].fields.error)
  end)
end)

describe("a hot reload", function()
  it("from handlers to a reconcile with a resync period resyncs", function()
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. dir) end)
    local path = write(dir, "h.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "h", resource = "v1/ConfigMap", on_add = function() end }
]])
    local env = testing.env { script = path }
    finally(function() env:stop() end)
    env:create(cm("a"))
    env:load(path, [[
local luaop = require "luaop"
return luaop.controller { name = "h", resource = "v1/ConfigMap", resync = 10,
  reconcile = function(ctx) ctx.log:info("reconciled", {}) end }
]])
    env:advance(60)
    assert.is_true(#env:logs { msg = "^reconciled$" } >= 6)
  end)
end)

describe("handlers and watch maps", function()
  it("run under the controller's memory budget too", function()
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. dir) end)
    local env = testing.env { script = write(dir, "m.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "m", resource = "v1/ConfigMap", memory = "16Mi",
  watches = { { "v1/Secret", map = function() local t = {} for i = 1, 1e7 do t[i] = ("x"):rep(32) .. i end end } },
  on_add = function(ctx, obj)
    local t = {}
    for i = 1, 1e7 do t[i] = ("x"):rep(32) .. i end
    ctx.log:info("allocated", { n = #t })
  end }
]]) }
    finally(function() env:stop() end)
    env:create(cm("a"))
    assert(env:create { apiVersion = "v1", kind = "Secret", metadata = { name = "s", namespace = "default" } })
    assert.are.same({}, env:logs { msg = "^allocated$" })
    local failed = env:logs { msg = "^event handler failed$" }
    assert.are.equal(2, #failed)
    for _, f in ipairs(failed) do assert.matches("memory budget of 16777216 bytes exceeded", f.fields.error) end
  end)
end)

describe("luaop.copy in a script", function()
  it("copies no metatable but a JSON array's, so a __gc added after setmetatable gets no finalizer", function()
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. dir) end)
    local env = testing.env { script = write(dir, "gc.lua", [[
local luaop = require "luaop"
local mt = {}
local t = setmetatable({ a = luaop.array() }, mt)
mt.__gc = function() luaop.log:info("finalizer ran", {}) end
local c = luaop.copy(t)
assert(getmetatable(c) == nil and luaop.json.encode(c) == '{"a":[]}')
c = nil
collectgarbage()
collectgarbage()
return luaop.controller { name = "gc", resource = "v1/ConfigMap", reconcile = function() end }
]]) }
    finally(function() env:stop() end)
    assert.are.same({}, env:logs { msg = "^finalizer ran$" })
  end)
end)

describe("luaop.set_controller", function()
  it("refuses a dependent outside its namespaced owner's namespace, or with no namespace, as controller-runtime does", function()
    local luaop = require "luaop"
    local owner = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "o", namespace = "team", uid = "u-1" } }
    assert.has_error(function()
      luaop.set_controller({ apiVersion = "v1", kind = "Secret", metadata = { name = "s" } }, owner)
    end, "an owner in namespace team can only own objects in it (this one's metadata.namespace is not set)")
    local child = luaop.set_controller({ apiVersion = "v1", kind = "Secret",
      metadata = { name = "s", namespace = "team" } }, owner)
    assert.are.equal("u-1", luaop.controller_of(child).uid)
  end)
end)

-- Each informer has a watch of its own, and nothing keeps two watches in
-- step: a cache can lag another one by any time (seconds, on a busy
-- machine). A reconcile that read its object, or what it owns, from a
-- cache other than the one whose event queued it could find it older than
-- that event (not there yet, or still there after its delete), end as done,
-- and never run again for it: the lagging cache's event queues nothing.
describe("a reconcile reads from the caches whose events queue it", function()
  local dir, env
  before_each(function() dir = proc.tempdir() end)
  after_each(function()
    if env then env:stop() end
    env = nil
    proc.sh("rm -rf " .. dir)
  end)

  -- the last "read" log line of name: whether the reconcile found it
  local function last_read(name)
    local found
    for _, l in ipairs(env:logs { msg = "^read$" }) do
      if l.fields.name == name then found = l.fields.found end
    end
    return found
  end

  it("its own object from the cache of its selector, when the cache of everything (owns) lags", function()
    -- its resource selected by a label; it owns the same kind, unselected:
    -- two caches of ConfigMaps
    env = testing.env { script = write(dir, "parents.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "parents", resource = "v1/ConfigMap", namespace = "default",
  label_selector = "role=parent", owns = { "v1/ConfigMap" },
  reconcile = function(ctx, req)
    local parent = ctx:get("ConfigMap", req)
    ctx.log:info("read", { name = req.name, found = parent ~= nil })
    if parent and not ctx:get("ConfigMap", req.name .. "-child", req.namespace) then
      assert(ctx:create(luaop.set_controller({ apiVersion = "v1", kind = "ConfigMap",
        metadata = { name = req.name .. "-child", namespace = req.namespace } }, parent)))
    end
  end }
]]) }
    local function unselected(path)
      return path:find("/namespaces/default/configmaps?", 1, true) ~= nil and not path:find("labelSelector", 1, true)
    end
    -- a new parent: its selector's cache has it, the other not yet
    env:hold_watches(unselected)
    local p = cm("p", { k = "v" })
    p.metadata.labels = { role = "parent" }
    assert(env:create(p))
    assert.is_true(last_read("p"))
    env:release_watches()
    assert.is_not_nil(env:get("ConfigMap", "p-child"))
    -- and deleted: gone from its selector's cache, still in the other
    env:hold_watches(unselected)
    assert(env:delete("ConfigMap", { namespace = "default", name = "p" }))
    assert.is_false(last_read("p"))
    env:release_watches()
    assert.is_false(last_read("p"))
  end)

  it("its own object as this process wrote or deleted it, or newer, when the cache of its selector lags", function()
    env = testing.env { script = write(dir, "steps.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "steps", resource = "v1/ConfigMap", namespace = "default",
  label_selector = "role=parent", owns = { "v1/ConfigMap" },
  reconcile = function(ctx, req)
    local cm = ctx:get("ConfigMap", req)
    if not cm then
      ctx.log:info("step", { name = req.name, step = "gone" })
      return
    end
    local step = tonumber(cm.data.step or "0")
    ctx.log:info("step", { name = req.name, step = step })
    if cm.data.go and step < 2 then
      assert(ctx:patch("ConfigMap", req, { data = { step = tostring(step + 1) } }))
    elseif cm.data.go then
      assert(ctx:delete(cm))
    end
    return luaop.requeue_after(1)
  end }
]]) }
    local function steps()
      local out = {}
      for _, l in ipairs(env:logs { msg = "^step$" }) do out[#out + 1] = l.fields.step end
      return out
    end
    local t = cm("t", { k = "v" })
    t.metadata.labels = { role = "parent" }
    assert(env:create(t))
    -- from now on only the cache without the selector hears of changes:
    -- the test's, then the reconcile's own
    env:hold_watches("labelSelector=")
    assert(env:patch("ConfigMap", { namespace = "default", name = "t" }, { data = { go = "yes" } }))
    env:advance(2)
    assert.are.same({ 0, 0, 1 }, steps())
    -- and then neither: the delete is known from this process's own
    env:hold_watches("/configmaps%?")
    env:advance(2)
    assert.are.same({ 0, 0, 1, 2, "gone" }, steps())
    env:release_watches()
    assert.is_nil(env:get("ConfigMap", "t"))
    assert.are.equal("gone", steps()[#steps()])
  end)

  it("what it owns from the cache of its owns, when another controller's cache of the kind lags", function()
    -- ConfigMaps cached twice: in default for secrets' owns, and in every
    -- namespace for another script's controller
    env = testing.env { scripts = {
      write(dir, "secrets.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "secrets", resource = "v1/Secret", namespace = "default",
  owns = { "v1/ConfigMap" },
  reconcile = function(ctx, req)
    local s = ctx:get("Secret", req)
    if not s then return end
    if not ctx:get("ConfigMap", req.name .. "-child", req.namespace) then
      assert(ctx:create(luaop.set_controller({ apiVersion = "v1", kind = "ConfigMap",
        metadata = { name = req.name .. "-child", namespace = req.namespace } }, s)))
    end
  end }
]]),
      write(dir, "all.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "all", resource = "v1/ConfigMap", reconcile = function() end }
]]) } }
    local caches = env.manager.by_kind.ConfigMap
    assert.are.equal(2, #caches)
    -- whichever of the two a read comes to first
    for _, name in ipairs { "a", "b" } do
      if name == "b" then caches[1], caches[2] = caches[2], caches[1] end
      assert(env:create { apiVersion = "v1", kind = "Secret", metadata = { name = name, namespace = "default" } })
      assert.is_not_nil(env:get("ConfigMap", name .. "-child"))
      -- its child deleted: the cache of its owns has seen it, the other not yet
      env:hold_watches("^/api/v1/configmaps%?")
      assert(env:delete("ConfigMap", { namespace = "default", name = name .. "-child" }))
      env:release_watches()
      assert.is_not_nil(env:get("ConfigMap", name .. "-child"), name .. "-child was not made again")
    end
  end)
end)
