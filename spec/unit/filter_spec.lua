-- luaop.filter: event filters on a controller's resource, owns and
-- watches. "generation" drops updates that leave metadata.generation as it
-- was (a status write), labels and annotations options pass their changes
-- too, a function(old, new) of the script's decides, under the budgets,
-- contained; adds and deletes pass the table forms. Through the test kit.
local testing = require "luaop.testing"
local filter = require "luaop.filter"
local proc = require "support.proc"
local kit = require "support.kit"

local function deployment(name, labels)
  return { apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = name, namespace = "default", labels = labels },
    spec = { replicas = 1, selector = { matchLabels = { app = name } },
      template = { metadata = { labels = { app = name } }, spec = { containers = { { name = "c", image = "x:1" } } } } } }
end

-- A controller of Deployments with filter = FILTER (Lua text)
local function script(filter_text, extra)
  return ([[
local luaop = require "luaop"
return luaop.controller {
  name = "f", resource = "apps/v1/Deployment", namespace = "default", filter = %s, %s
  reconcile = function(ctx, req) ctx.log:info("reconciled " .. req.name) end,
}
]]):format(filter_text, extra or "")
end

describe("luaop.filter", function()
  local t = kit.per_test(before_each, after_each)
  local function reconciles(name) return #t.env:logs { msg = "^reconciled " .. name .. "$" } end

  -- one write of the test's to Deployment d: f(d) changes the copy it gets
  local function change(f, status)
    local d = t.env:get("Deployment", "d")
    f(d)
    assert((status and t.env.update_status or t.env.update)(t.env, d))
  end

  it("generation: drops a status-only update, a label change and a finalizer, passes a spec change, the add, the "
    .. "start of a deletion and the delete",
    function()
      t.env = testing.env { script = proc.write(t.dir, "f.lua", script('"generation"')) }
      assert(t.env:create(deployment("d")))
      assert.are.equal(1, reconciles("d"))
      local gen = t.env:get("Deployment", "d").metadata.generation
      change(function(d) d.status = { observedGeneration = gen, replicas = 1 } end, true)
      change(function(d) d.metadata.labels = { tier = "small" } end)
      change(function(d) d.metadata.annotations = { note = "x" } end)
      assert.are.equal(gen, t.env:get("Deployment", "d").metadata.generation)
      assert.are.equal(1, reconciles("d"))
      change(function(d) d.spec.replicas = 3 end)
      assert.are.equal(gen + 1, t.env:get("Deployment", "d").metadata.generation)
      assert.are.equal(2, reconciles("d"))
      -- a finalizer (metadata: dropped); the deletion it holds raises the
      -- generation (passes), and the delete once it is taken off
      change(function(d) d.metadata.finalizers = { "example.com/hold" } end)
      assert.are.equal(2, reconciles("d"))
      assert(t.env:delete("Deployment", "d"))
      assert.are.equal(3, reconciles("d"))
      assert.are.equal(gen + 2, t.env:get("Deployment", "d").metadata.generation)
      change(function(d) d.metadata.finalizers = nil end)
      assert.is_nil(t.env:get("Deployment", "d"))
      assert.are.equal(4, reconciles("d"))
    end)

  it("{ generation = true, labels = true } passes a label change too; annotations = true an annotation change",
    function()
      t.env = testing.env { script = proc.write(t.dir, "f.lua", script("{ generation = true, labels = true }")) }
      assert(t.env:create(deployment("d")))
      change(function(d) d.metadata.annotations = { note = "x" } end)
      change(function(d) d.status = { replicas = 1 } end, true)
      assert.are.equal(1, reconciles("d"))
      change(function(d) d.metadata.labels = { tier = "small" } end)
      assert.are.equal(2, reconciles("d"))
      t.env:stop()
      t.env = testing.env { script = proc.write(t.dir, "g.lua", script("{ annotations = true }")) }
      assert(t.env:create(deployment("d")))
      change(function(d) d.spec.replicas = 2 end)
      change(function(d) d.metadata.labels = { tier = "small" } end)
      assert.are.equal(1, reconciles("d"))
      change(function(d) d.metadata.annotations = { note = "x" } end)
      assert.are.equal(2, reconciles("d"))
    end)

  it("without a filter, every update reconciles (the default), a status write included", function()
    t.env = testing.env { script = proc.write(t.dir, "f.lua", script("nil")) }
    assert(t.env:create(deployment("d")))
    change(function(d) d.status = { replicas = 1 } end, true)
    change(function(d) d.metadata.labels = { tier = "small" } end)
    assert.are.equal(3, reconciles("d"))
  end)

  it("a filter function sees copies of old and new (old nil on an add, new nil on a delete); false drops the event",
    function()
      t.env = testing.env { script = proc.write(t.dir, "f.lua", script([[function(old, new)
    local seen = (old and old.metadata.labels or {}).seen or "-"
    luaop.log:info("filter", { old = old and (old.metadata.labels or {}).v or "nil",
      new = new and (new.metadata.labels or {}).v or "nil" })
    if new then new.metadata.labels = { v = "scribbled" } end -- a copy: nobody else sees it
    return seen ~= "-" or old == nil or new == nil
  end]])) }
      local function seen()
        local out = {}
        for _, l in ipairs(t.env:logs { msg = "^filter$" }) do out[#out + 1] = l.fields.old .. ">" .. l.fields.new end
        return out
      end
      assert(t.env:create(deployment("d", { v = "1" })))
      change(function(d) d.metadata.labels = { v = "2" } end)
      assert.are.same({ "nil>1", "1>2" }, seen())
      assert.are.equal(1, reconciles("d")) -- the update: false
      change(function(d) d.metadata.labels = { v = "3", seen = "yes" } end)
      change(function(d) d.metadata.labels.v = "4" end)
      assert.are.equal(2, reconciles("d")) -- old had seen: true
      assert.are.equal("4", t.env:get("Deployment", "d").metadata.labels.v)
      assert(t.env:delete("Deployment", "d"))
      assert.are.same({ "nil>1", "1>2", "2>3", "3>4", "4>nil" }, seen())
      assert.are.equal(3, reconciles("d"))
    end)

  it("a filter that raises, runs out of its budget or returns no boolean is logged with its traceback and the event "
    .. "passes; nothing else stops", function()
    t.env = testing.env { script = proc.write(t.dir, "f.lua", script([[function(old, new)
    local how = new and new.metadata.labels and new.metadata.labels.how
    if how == "raise" then error("no such thing") end
    if how == "table" then error({ reason = "odd" }) end
    if how == "loop" then while true do end end
    if how == "nil" then return nil end
    return old == nil
  end]], "instructions = 1000000,")) }
    assert(t.env:create(deployment("d")))
    for i, how in ipairs { "raise", "table", "loop", "nil" } do
      change(function(d) d.metadata.labels = { how = how } end)
      assert.are.equal(1 + i, reconciles("d"))
    end
    local failed = t.env:logs { msg = "^event filter failed: the event passes$" }
    assert.are.equal(4, #failed)
    local f = failed[1].fields
    assert.matches("f%.lua:3$", f.filter)
    assert.are.same({ "resource apps/v1/Deployment", "update", "default", "d" }, { f.of, f.event, f.namespace, f.name })
    assert.matches("^[^\n]*f%.lua:5: no such thing\nstack traceback:\n.*f%.lua:5", f.error)
    assert.matches("^odd\nstack traceback:\n.*f%.lua:6", failed[2].fields.error)
    assert.matches("f%.lua:7: instruction budget of 1000000 exceeded", failed[3].fields.error)
    assert.matches("returned nil: a filter returns true %(the event passes%) or false", failed[4].fields.error)
    -- and the controller still runs, its filter too
    change(function(d) d.metadata.labels = { how = "fine" } end)
    assert.are.equal(5, reconciles("d"))
    assert.are.equal(4, #t.env:logs { msg = "^event filter failed" })
  end)

  it("filters an owns entry's and a watch's events before the owner or the map is asked", function()
    t.env = testing.env { script = proc.write(t.dir, "f.lua", [[
local luaop = require "luaop"
return luaop.controller {
  name = "f", resource = "apps/v1/Deployment", namespace = "default",
  owns = { { "apps/v1/ReplicaSet", filter = "generation" } },
  watches = { { "v1/ConfigMap", filter = function(old, new) return new ~= nil and new.data ~= nil end,
    map = function(cm) luaop.log:info("mapped " .. cm.metadata.name) return { namespace = "default", name = "d" } end } },
  reconcile = function(ctx, req) ctx.log:info("reconciled " .. req.name) end,
}
]]) }
    local d = assert(t.env:create(deployment("d")))
    assert.are.equal(1, reconciles("d"))
    local rs = deployment("rs")
    rs.kind, rs.metadata.ownerReferences = "ReplicaSet", { { apiVersion = "apps/v1", kind = "Deployment",
      name = "d", uid = d.metadata.uid, controller = true } }
    rs = assert(t.env:create(rs))
    assert.are.equal(2, reconciles("d"))
    rs.status = { replicas = 1 }
    rs = assert(t.env:update_status(rs))
    assert.are.equal(2, reconciles("d"))
    rs.spec.replicas = 2
    assert(t.env:update(rs))
    assert.are.equal(3, reconciles("d"))
    assert(t.env:create(kit.cm("empty")))
    assert.are.equal(0, #t.env:logs { msg = "^mapped" })
    assert(t.env:create(kit.cm("full", { k = "v" })))
    assert.are.equal(1, #t.env:logs { msg = "^mapped full$" })
    assert.are.equal(4, reconciles("d"))
  end)

  it("filters the events handlers are told of, the adds of the cache when they start too", function()
    t.env = testing.env { objects = { deployment("early"), deployment("skipped", { skip = "yes" }) },
      script = proc.write(t.dir, "f.lua", [[
local luaop = require "luaop"
return luaop.controller {
  name = "h", resource = "apps/v1/Deployment", namespace = "default",
  filter = function(old, new)
    local o = new or old
    return not (o.metadata.labels and o.metadata.labels.skip) and (old == nil or new == nil
      or old.metadata.generation ~= new.metadata.generation)
  end,
  on_add = function(ctx, o) ctx.log:info("add " .. o.metadata.name) end,
  on_update = function(ctx, old, o) ctx.log:info("update " .. o.metadata.name) end,
  on_delete = function(ctx, o) ctx.log:info("delete " .. o.metadata.name) end,
}
]]) }
    assert.are.equal(1, #t.env:logs { msg = "^add early$" })
    assert.are.equal(0, #t.env:logs { msg = "^add skipped$" })
    local d = t.env:get("Deployment", "early")
    d.status = { replicas = 1 }
    d = assert(t.env:update_status(d))
    assert.are.equal(0, #t.env:logs { msg = "^update" })
    d.spec.replicas = 4
    assert(t.env:update(d))
    assert.are.equal(1, #t.env:logs { msg = "^update early$" })
    assert(t.env:delete("Deployment", "skipped"))
    assert(t.env:delete("Deployment", "early"))
    assert.are.same({ "delete early" }, (function()
      local out = {}
      for _, l in ipairs(t.env:logs { msg = "^delete" }) do out[#out + 1] = l.msg end
      return out
    end)())
  end)

  it("passes every update of an object without a generation (a ConfigMap, a Secret, as on a cluster)", function()
    t.env = testing.env { script = proc.write(t.dir, "f.lua", [[
local luaop = require "luaop"
return luaop.controller {
  name = "f", resource = "v1/ConfigMap", namespace = "default", filter = "generation",
  reconcile = function(ctx, req) ctx.log:info("reconciled " .. req.name) end,
}
]]) }
    assert(t.env:create(kit.cm("c", { k = "v" })))
    assert.is_nil(t.env:get("ConfigMap", "c").metadata.generation) -- the kit keeps none, as the API server
    local c = t.env:get("ConfigMap", "c")
    c.metadata.labels = { tier = "small" }
    assert(t.env:update(c))
    assert.are.equal(2, reconciles("c"))
    local gen = filter.new("generation")
    local function cm(labels, generation)
      return { metadata = { name = "c", labels = labels, generation = generation }, data = { k = "v" } }
    end
    assert.is_true(gen(cm(), cm({ a = "b" })))
    assert.is_true(gen(cm(nil, 1), cm()))
    assert.is_false(gen(cm(nil, 1), cm({ a = "b" }, 1)))
    assert.is_true(gen(nil, cm(nil, 1)))
    assert.is_true(gen(cm(nil, 1), nil))
    -- labels: nil and {} are alike; a value changed, added or removed is a change
    local labels = filter.new { labels = true }
    assert.is_false(labels(cm(nil, 1), cm({}, 2)))
    assert.is_true(labels(cm({ a = "b" }), cm({ a = "c" })))
    assert.is_true(labels(cm({ a = "b" }), cm({ a = "b", c = "d" })))
    assert.is_true(labels(cm({ a = "b", c = "d" }), cm({ a = "b" })))
  end)

  it("refuses a malformed filter at its field's line, in the kit and in --check", function()
    local function refused(text)
      local path = proc.write(t.dir, "bad.lua", text)
      local ok, err = pcall(testing.env, { script = path })
      assert.is_false(ok)
      local _, out = proc.run { "build/luaop", "--check", path }
      return tostring(err), out, path
    end
    local err, out, path = refused [[
local luaop = require "luaop"
return luaop.controller {
  name = "bad", resource = "v1/ConfigMap",
  owns = { "v1/Secret",
    { "v1/Pod", filter = { generation = "yes" } } },
  watches = { { "v1/Service", map = function() end,
    filter = "generaton" } },
  filter = { spec = true },
  reconcile = function(ctx, req) end,
}
]]
    local p = path:gsub("%p", "%%%0")
    assert.are.equal(path .. ":4: controller bad: owns[2].filter: generation must be true or false", err)
    assert.matches(p .. ":4: controller bad: owns%[2%]%.filter: generation must be true or false", out)
    assert.matches(p .. ':7: controller bad: watches%[1%]%.filter: "generaton" is not a filter: want "generation"', out)
    assert.matches(p .. ":8: controller bad: filter: spec is not a filter option: want generation, labels, annotations",
      out)
    err, out = refused [[
local luaop = require "luaop"
return luaop.controller {
  name = "bad", resource = "v1/ConfigMap",
  filter = {},
  reconcile = function(ctx, req) end,
}
]]
    assert.matches(":4: controller bad: filter: the table asks for nothing", err)
    assert.matches(":4: controller bad: filter: the table asks for nothing", out)
    -- an owns entry's unknown field: logged at the line of owns, as a definition's is
    path = proc.write(t.dir, "odd.lua", [[
local luaop = require "luaop"
return luaop.controller {
  name = "odd", resource = "v1/ConfigMap",
  owns = { { "v1/Secret", filtr = "generation" } },
  reconcile = function(ctx, req) end,
}
]])
    local _
    _, out = proc.run { "build/luaop", "--check", path }
    assert.matches(":4: controller odd: owns%[1%]: unknown field filtr %(did you mean filter%?%)", out)
  end)
end)
