-- The test kit (luaop.testing) and `luaop --test`: a script's controllers
-- against the in-memory API server on a clock that moves only when told,
-- and the runner for authors without busted. (The operators' own specs,
-- spec/unit/operators/, use the kit; here, what the kit itself promises.)
local testing = require "luaop.testing"
local guard = require "luaop.testing.guard"
local proc = require "support.proc"
local kit = require "support.kit"
local luaop_bin = require("support.luaop").bin

local write = proc.write

-- A script whose controller counts its reconciles and does what the
-- ConfigMap's data.do says.
local SCRIPT = [[
local luaop = require "luaop"
return luaop.controller {
  name = "kit", resource = "v1/ConfigMap",
  reconcile = function(ctx, req)
    local cm = ctx:get("ConfigMap", req)
    if not cm then return end
    local what = cm.data and cm.data["do"]
    ctx.log:info("reconciled", { at = luaop.time.format(luaop.time.wall()), name = req.name })
    if what == "requeue-hour" then return luaop.requeue_after(3600) end
    if what == "raise" then error("asked to fail") end
    if what == "spin" then while true do end end
    if what == "write" then -- a changed value every time: a write loop
      cm.data.n = tostring(tonumber(cm.data.n or "0") + 1)
      assert(ctx:update(cm))
    end
    if what == "now" then return luaop.requeue_after(0) end
    if what == "micro" then return luaop.requeue_after(1e-6) end
    if what == "yield" then luaop.spawn(function() while true do luaop.sleep(0) end end) end
    if what == "child" and not ctx:get("ConfigMap", req.name .. "-child", req.namespace) then
      assert(ctx:create(luaop.set_controller({ apiVersion = "v1", kind = "ConfigMap",
        metadata = { name = req.name .. "-child", namespace = req.namespace } }, cm)))
    end
  end,
}
]]

describe("the test kit", function()
  local t = kit.per_test(before_each, after_each)

  local function cm(name, what) return kit.cm(name, { ["do"] = what }) end

  local function reconciled(name)
    local out = {}
    for _, l in ipairs(t.env:logs { msg = "^reconciled$" }) do
      if l.fields.name == name then out[#out + 1] = l.fields.at end
    end
    return out
  end

  it("runs a script's controller until idle after each step, on a clock that stands still until advanced", function()
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT), time = "2026-01-01T00:00:00Z" }
    t.env:create(cm("a", "requeue-hour"))
    assert.are.same({ "2026-01-01T00:00:00Z" }, reconciled("a"))
    t.env:run()
    assert.are.equal("2026-01-01T00:00:00Z", t.env:time())
    t.env:advance(3599)
    assert.are.same({ "2026-01-01T00:00:00Z" }, reconciled("a"))
    t.env:advance(1) -- requeue_after(3600): at that time exactly, once
    assert.are.same({ "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z" }, reconciled("a"))
    t.env:advance(7200)
    assert.are.same({ "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z",
      "2026-01-01T03:00:00Z" }, reconciled("a"))
    assert.are.equal("2026-01-01T03:00:00Z", t.env:time())
  end)

  it("steps its clock to a wait's time, to the microsecond, never a microsecond past it however its due time rounded",
    function()
    -- due times are monotonic seconds as doubles: a wait of 10 s may come
    -- due at 10 s and a nanosecond, or a nanosecond short of 10 s
    assert.are.equal(10, guard.step(10 - 1e-9, 30))
    assert.are.equal(10 + 1e-9, guard.step(10 + 1e-9, 30)) -- (not 10.000001)
    assert.are.equal(2.5, guard.step(2.5, 30))
    assert.are.equal(1e-7, guard.step(1e-7, 30)) -- never short of due
    assert.are.equal(0.5, guard.step(0.5 - 1e-9, 0.5)) -- the end, when due rounds past it
    -- and the wall clock a reconcile reads then is the second itself
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT), time = "2026-01-01T00:00:00Z" }
    t.env:create(cm("a", "requeue-hour"))
    t.env:advance(3600 * 5)
    assert.are.same({ "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z",
      "2026-01-01T03:00:00Z", "2026-01-01T04:00:00Z", "2026-01-01T05:00:00Z" }, reconciled("a"))
  end)

  it("retries a reconcile that raises with backoff on its clock, logging the error with its file and line", function()
    local path = write(t.dir, "kit.lua", SCRIPT)
    t.env = testing.env { script = path }
    t.env:create(cm("r", "raise"))
    t.env:advance(0.1) -- 5, 10, 20, 40 ms: four more tries
    assert.are.equal(5, #reconciled("r"))
    local errors = t.env:logs { level = "error", msg = "^Reconciler error$" }
    assert.are.equal(5, #errors)
    assert.matches(path:gsub("%p", "%%%0") .. ":10: asked to fail", errors[1].fields.error)
  end)

  it("contains a reconcile that runs away under its instruction budget", function()
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT) }
    t.env:create(cm("s", "spin"))
    t.env:create(cm("ok", "child"))
    assert.is_not_nil(t.env:get("ConfigMap", "ok-child"))
    assert.matches("instruction budget", t.env:logs { level = "error" }[1].fields.error)
  end)

  it("keeps an action log of the operator's requests, as client-go's fake does, without the test's own", function()
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT) }
    t.env:create(cm("p", "child"))
    local acts = t.env:actions()
    assert.are.equal(1, #acts)
    assert.are.same({ "create", "ConfigMap", "default", "p-child" }, { acts[1].verb, acts[1].kind, acts[1].namespace,
      acts[1].object.metadata.name })
    assert.is_true(#t.env:actions { reads = true } > 1) -- its LIST and WATCH
    t.env:clear_actions()
    assert.are.same({}, t.env:actions())
  end)

  it("makes the next matching requests fail as told, and the controller retries them", function()
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT) }
    t.env:fail { verb = "create", kind = "ConfigMap", name = "f-child", reason = "Forbidden", times = 2 }
    local made, err = t.env:create(cm("f", "child"))
    assert.is_not_nil(made, err and tostring(err))
    assert.is_nil(t.env:get("ConfigMap", "f-child"))
    t.env:advance(1) -- the backoff: 5 ms, 10 ms
    assert.is_not_nil(t.env:get("ConfigMap", "f-child"))
    local failed = t.env:actions { verb = "create", injected = true }
    assert.are.equal(2, #failed)
    local errors = t.env:logs { level = "error", msg = "^Reconciler error$" }
    assert.are.equal(2, #errors)
    assert.matches("kit%.lua:%d+: Forbidden %(403%): ", errors[1].fields.error)
  end)

  it("seeds CRDs and objects from YAML manifests, as kubectl apply -f would read them", function()
    local manifest = write(t.dir, "m.yaml", [[
apiVersion: v1
kind: ConfigMap
metadata: {name: from-yaml, namespace: default}
data: {do: child, n: "1"}
---
---
apiVersion: v1
kind: Namespace
metadata:
  name: team
]])
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT), manifests = { manifest, "manifests/crds" } }
    assert.is_not_nil(t.env:get("Namespace", "team"))
    assert.is_not_nil(t.env:get("ConfigMap", "from-yaml-child"))
    assert(t.env:create { apiVersion = "useless.container.training/v1alpha1", kind = "Machine",
      metadata = { name = "m", namespace = "default" }, spec = { switches = 1 } })
  end)

  it("names the file and line of a script that does not load", function()
    local path = write(t.dir, "broken.lua", "local luaop = require 'luaop'\nreturn luaop.controller {\n")
    local ok, err = pcall(testing.env, { script = path })
    assert.is_false(ok)
    assert.matches(path:gsub("%p", "%%%0") .. ":3:", err)
  end)
end)

describe("the test kit never hangs", function()
  local t = kit.per_test(before_each, after_each)
  local core = require "luaop.core"

  local function cm(name, what) return kit.cm(name, { ["do"] = what }) end

  -- raises what fn raised, and the wall seconds it took (asserted on only
  -- as a lower bound: valgrind on a loaded machine is 50 times slower)
  local function failure(fn, ...)
    local t0 = core.kit.clock()
    local ok, err = pcall(fn, ...)
    assert.is_false(ok, "no error")
    return tostring(err), core.kit.clock() - t0
  end

  it("fails at once on a kind the kit does not serve, naming it and the controller, and on the test's own calls", function()
    local path = write(t.dir, "kinds.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "typo", resource = "v1/ConfigMap", owns = { "apps/v1/Deployments" },
  reconcile = function() end }
]])
    local err = failure(testing.env, { script = path })
    assert.is_truthy((err):find('controller typo: owns "apps/v1/Deployments"', 1, true), err)
    assert.is_truthy((err):find('Did you mean "apps/v1/Deployment"', 1, true), err)
    assert.matches("testkit_spec%.lua:%d+: ", err) -- the spec's line, where testing.env was called
    err = failure(testing.env, { script = write(t.dir, "unknown.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "gizmos", resource = "example.com/v1/Gizmo", reconcile = function() end }
]]) })
    assert.is_truthy((err):find('controller gizmos: resource "example.com/v1/Gizmo"', 1, true), err)
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT) }
    err = failure(t.env.create, t.env, { apiVersion = "example.com/v1", kind = "Gizmo", metadata = { name = "g" } })
    assert.matches('^[^\n]*testkit_spec%.lua:%d+: env:create: [^\n]*"example.com/v1/Gizmo"', err)
    assert.matches('env:get: [^\n]*"Gizmo"', (failure(t.env.get, t.env, "Gizmo", "g")))
  end)

  it("fails at once when a cache never syncs (its LIST refused every time), naming its kind", function()
    local apiserver = require "luaop.testing.apiserver"
    local new = apiserver.new
    apiserver.new = function(o)
      local s = new(o)
      s:fail { verb = "list", kind = "ConfigMap", reason = "Forbidden", times = 1000 }
      s:fail { verb = "watch", kind = "ConfigMap", reason = "Forbidden", times = 1000 } -- (a streamed list)
      return s
    end
    local ok, err = pcall(failure, testing.env, { script = write(t.dir, "kit.lua", SCRIPT) })
    apiserver.new = new
    assert.is_true(ok, err)
    assert.matches("testkit_spec%.lua:%d+: still waiting once everything else was idle[^\n]*%(the caches of "
      .. "v1/ConfigMap never synced: see env:logs%(%)%)", err)
  end)

  it("fails a write loop and a requeue_after(0), naming the controller, the key and the bound", function()
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT) }
    local err = failure(t.env.create, t.env, cm("w", "write"))
    assert.matches("livelock: controller kit, key default/w reconciled 101 times in a row in one run with nothing "
      .. "created or deleted meanwhile while the clock stood still %(more than max_reconciles = 100: "
      .. "testing.env{max_reconciles =}%) %(a reconcile that writes a changed value every time%?%)", err)
    assert.matches("testkit_spec%.lua:%d+: ", err)
    assert.is_true(#t.env:actions { verb = "update" } > 100) -- (counted: each reconcile wrote)
    t.env:stop()
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT) }
    err = failure(t.env.create, t.env, cm("n", "now"))
    assert.is_truthy((err):find("livelock: controller kit, key default/n", 1, true), err)
    assert.is_truthy((err):find("its reconcile returns requeue_after(0) every time", 1, true), err)
    t.env:stop()
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT), max_reconciles = 0 }
    err = failure(t.env.create, t.env, cm("n", "now"))
    assert.is_truthy((err):find("key default/n reconciled 1 time in a row", 1, true), err)
    assert.is_truthy((err):find("more than max_reconciles = 0", 1, true), err)
  end)

  it("lets a key be reconciled without bound while each reconcile creates (an ordered rollout converges)", function()
    -- one child a reconcile, each child's event bringing the next: 150
    -- reconciles of one key in one run, each after a create
    t.env = testing.env { script = write(t.dir, "stepper.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "stepper", resource = "v1/ConfigMap", label_selector = "role=parent",
  owns = { "v1/ConfigMap" },
  reconcile = function(ctx, req)
    local parent = ctx:get("ConfigMap", req)
    if not parent then return end
    for i = 1, tonumber(parent.data.count) do
      if not ctx:get("ConfigMap", req.name .. "-" .. i, req.namespace) then
        assert(ctx:create(luaop.set_controller({ apiVersion = "v1", kind = "ConfigMap", metadata = {
          name = req.name .. "-" .. i, namespace = req.namespace } }, parent)))
        return luaop.requeue_after(0) -- (and its own requeue: still progress)
      end
    end
  end }
]]), max_reconciles = 3 }
    local parent = kit.cm("p", { count = "150" })
    parent.metadata.labels = { role = "parent" }
    assert(t.env:create(parent))
    assert.is_not_nil(t.env:get("ConfigMap", "p-150"))
    assert.are.equal(150, #t.env:actions { verb = "create" })
  end)

  it("names the controller and key when advance is still busy after MAX_STEPS steps", function()
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT) }
    t.env:create(cm("m", "micro"))
    local steps = testing.MAX_STEPS
    testing.MAX_STEPS = 50
    local err = failure(t.env.advance, t.env, 1)
    testing.MAX_STEPS = steps
    assert.matches("after 50 steps[^\n]*: controller kit, key default/m reconciled %d+ times on the way", err)
  end)

  it("bounds a run that never idles with no reconcile to blame, and ends a busy run at the test's deadline", function()
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT) }
    local err = failure(t.env.create, t.env, cm("y", "yield"))
    assert.is_truthy((err):find("the loop still had work after 100000 iterations while the clock stood still", 1, true), err)
    t.env:stop()
    local max = guard.MAX_ITERATIONS
    guard.MAX_ITERATIONS = math.huge
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT), deadline = 0.5 }
    local err2, took = failure(t.env.create, t.env, cm("y", "yield"))
    guard.MAX_ITERATIONS = max
    assert.is_truthy((err2):find("the test's deadline of 0.5 s passed with the loop still busy", 1, true), err2)
    assert.is_true(took > 0, took) -- (ended: no bound of seconds above, which valgrind would break)
  end)

  it("checks the deadline as every run starts and ends, a run of a few iterations too", function()
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT), deadline = 0.2 }
    local t0 = core.kit.clock()
    repeat until core.kit.clock() > t0 + 0.3 -- (the test's own work, past the deadline)
    local err = failure(t.env.create, t.env, cm("a", "child"))
    assert.is_truthy((err):find("testkit_spec.lua:", 1, true), err)
    assert.is_truthy((err):find("the test's deadline of 0.2 s passed", 1, true), err)
    assert.is_truthy((failure(t.env.run, t.env)):find("deadline of 0.2 s passed", 1, true))
  end)

  it("reads in ctx:get's order, a namespaced kind in the env's namespace unless told", function()
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT), namespace = "team",
      objects = { { apiVersion = "v1", kind = "Namespace", metadata = { name = "team" } } } }
    t.env:create(kit.cm("a", { x = "default" }))
    local other = kit.cm("a", { x = "team" })
    other.metadata.namespace = "team"
    t.env:create(other)
    assert.are.equal("team", t.env:get("ConfigMap", "a").data.x)
    assert.are.equal("default", t.env:get("ConfigMap", "a", "default").data.x)
    assert.are.equal("default", t.env:get("ConfigMap", { namespace = "default", name = "a" }).data.x)
    assert.is_nil(t.env:get("ConfigMap", "default", "a")) -- the old order: a ConfigMap "default" in namespace a
    assert.are.equal("team", t.env:get("Namespace", "team").metadata.name)
  end)

  it("fails only the scripts' requests as env:fail says, and the test's own with test = true", function()
    t.env = testing.env { script = write(t.dir, "kit.lua", SCRIPT) }
    t.env:fail { verb = "create", kind = "ConfigMap", reason = "Forbidden" }
    assert(t.env:create(cm("f", "child"))) -- the test's own: not failed
    assert.is_nil(t.env:get("ConfigMap", "f-child")) -- the script's: failed once
    assert.are.equal(1, #t.env:actions { verb = "create", injected = true })
    t.env:fail { verb = "create", kind = "ConfigMap", reason = "Forbidden", test = true }
    local made, err = t.env:create(kit.cm("g"))
    assert.is_nil(made)
    assert.are.equal("Forbidden", err.reason)
    assert(t.env:create(kit.cm("h"))) -- once only
  end)
end)

describe("luaop.core.yaml", function()
  local yaml, json = require("luaop.core").yaml, require("luaop.core").json

  it("reads every document of a manifest, typed as sigs.k8s.io/yaml types it", function()
    local docs = assert(yaml.decode([[
a: [1, 2.5, yes, off, '3', ~, 0x10, 0o17, 0644, 1e3, x, "0644"]
b: {}
c: []
---
---
kind: Namespace
]]))
    assert.are.equal(3, #docs)
    assert.are.equal('{"a":[1,2.5,true,false,"3",null,16,15,420,1000,"x","0644"],"b":{},"c":[]}', json.encode(docs[1]))
    assert.are.equal("{}", json.encode(docs[2]))
    assert.are.equal("Namespace", docs[3].kind)
  end)

  it("refuses aliases and malformed YAML, naming the line", function()
    assert.are.same({ nil, "line 2: YAML aliases are not supported here" }, { yaml.decode("a: &x 1\nb: *x\n") })
    local docs, err = yaml.decode("a: [\n")
    assert.is_nil(docs)
    assert.matches("^line 2: ", err)
  end)
end)

describe("luaop --test", function()
  local dir
  before_each(function() dir = proc.tempdir() end)
  after_each(function() proc.sh("rm -rf " .. dir) end)

  it("runs the operators' specs with the shipped binary and no cluster", function()
    local code, out = proc.run({ luaop_bin, "--test", "spec/unit/operators" },
      { KUBECONFIG = false, HOME = "/nonexistent", KUBERNETES_SERVICE_HOST = false })
    assert.are.equal(0, code, out)
    assert.matches("\n(%d+) passed, 0 failed\n$", out)
    assert.is_true(tonumber(out:match("\n(%d+) passed, 0 failed\n$")) >= 20)
    assert.not_matches("not ok", out)
  end)

  it("notes under a test that passed the errors its controllers logged, which no assertion looked at", function()
    write(dir, "op.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "op", resource = "v1/ConfigMap",
  reconcile = function() return luaop.requeue_after end }
]])
    write(dir, "n_spec.lua", [[
local testing = require "luaop.testing"
describe("n", function()
  it("creates", function()
    local env = testing.env { script = "op.lua" }
    assert(env:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "a" } })
    env:stop()
  end)
  it("is quiet", function() end)
end)
]])
    local code, out = proc.run { luaop_bin, "--test", dir .. "/n_spec.lua" }
    assert.are.equal(0, code, out)
    assert.matches("ok 1 %- n creates\n# note: the controllers logged 1 error %(env:logs { level = \"error\" } has "
      .. "them%), the first: ERROR controller%.op Reconciler error {error=[^\n]*op%.lua:3: %(controller op's "
      .. "reconcile%) reconcile returned a function", out)
    assert.matches("ok 2 %- n is quiet\n1%.%.2", out)
  end)

  it("reports each failure with its file and line, a file that does not load, and exits 1", function()
    -- (and finds spec files in the directories below the one named)
    write(dir, "a_spec.lua", [[
describe("sums", function()
  it("adds", function() assert.are.equal(2, 1 + 1) end)
  it("fails", function() assert.are.same({ 1 }, { 2 }) end)
  it("negates", function() assert.is_not.equal(1, 2) end)
  pending("later")
end)
]])
    write(dir, "b_test.lua", "describe('x', function(\n")
    proc.sh("mkdir -p " .. dir .. "/sub/deeper")
    write(dir .. "/sub/deeper", "c_spec.lua", "describe('deep', function() it('runs', function() end) end)\n")
    write(dir, "helpers.lua", "error('never run')")
    local code, out = proc.run { luaop_bin, "--test", dir }
    assert.are.equal(1, code)
    assert.matches("ok 1 %- sums adds\n", out)
    assert.matches("not ok 2 %- sums fails\n# [^\n]*a_spec%.lua:3: expected the same as %[1%], got %[2%]", out)
    assert.matches("ok 3 %- sums negates\n", out)
    assert.matches("ok 4 %- sums later # SKIP", out)
    assert.matches("not ok 5 %- [^\n]*b_test%.lua\n# [^\n]*b_test%.lua:2:", out)
    assert.matches("ok 6 %- deep runs\n", out) -- a spec in a directory below, as busted finds them
    assert.matches("\n3 passed, 2 failed, 1 skipped\n$", out)
    assert.not_matches("never run", out)
  end)

  it("fails a file named that is no spec and defines no test (a script given by mistake), saying what to run", function()
    write(dir, "op.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "op", resource = "v1/ConfigMap", reconcile = function() end }
]])
    local code, out = proc.run { luaop_bin, "--test", dir .. "/op.lua" }
    assert.are.equal(1, code, out)
    assert.matches("not ok 1 %- [^\n]*op%.lua\n# [^\n]*op%.lua defines no test %(describe, it%): luaop %-%-test runs "
      .. "specs; a script is tested by a spec that loads it with testing%.env { script = \"op%.lua\" }", out)
    assert.matches("\n0 passed, 1 failed\n$", out)
  end)

  -- the path of a file beside this spec's temporary directory, as a
  -- pattern
  local function lit(str) return (str:gsub("%p", "%%%0")) end
  local bin = luaop_bin:sub(1, 1) == "/" and luaop_bin or proc.cwd() .. "/" .. luaop_bin

  it("shows a failing test's reconcile errors and last log lines, what a negated check expected, an API error", function()
    write(dir, "op.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "op", resource = "v1/ConfigMap",
  reconcile = function(ctx, req)
    ctx.log:info("looking", { name = req.name })
    error("the reconcile broke")
  end }
]])
    write(dir, "f_spec.lua", [[
local testing = require "luaop.testing"
describe("f", function()
  local env
  before_each(function() env = testing.env { script = "op.lua" } end)
  after_each(function() env:stop() end)
  it("fails after a reconcile error", function()
    env:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "a" } }
    assert.are.equal(1, 2)
  end)
  it("negates nil", function() assert.is_not_nil(nil) end)
  it("negates equal", function() assert.are_not.equal(1, 1) end)
  it("raises an API error", function()
    assert(env:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "BAD_" } })
  end)
end)
]])
    local ok, out = proc.sh(("cd / && %s --test %s"):format(proc.quote(bin), proc.quote(dir .. "/f_spec.lua")))
    assert.is_false(ok, out)
    assert.matches("not ok 1 %- f fails after a reconcile error\n# [^\n]*f_spec%.lua:8: expected 1, got 2\n"
      .. "# the env's errors %(1%):\n#   ERROR controller%.op Reconciler error {[^\n]*op%.lua:5: the reconcile broke", out)
    assert.matches("# the env's last %d+ log lines[^\n]*\n.-#   INFO controller%.op looking {name=a, namespace=default}", out)
    assert.matches("not ok 2 %- f negates nil\n# [^\n]*f_spec%.lua:10: expected a non%-nil value, got nil\n", out)
    assert.matches("not ok 3 %- f negates equal\n# [^\n]*f_spec%.lua:11: expected a value other than 1, got 1\n", out)
    assert.matches('not ok 4 %- f raises an API error\n# [^\n]*f_spec%.lua:13: Invalid %(422%): ConfigMap "BAD_" is invalid', out)
    assert.not_matches('{"code"', out)
  end)

  it("ends a test past its deadline, even a loop of its own that swallows errors, with --test-timeout or LUAOP_TEST_TIMEOUT", function()
    write(dir, "loop_spec.lua", [[
local testing = require "luaop.testing"
describe("l", function()
  it("loops", function() while true do end end)
  it("swallows", function()
    while true do pcall(function() for _ = 1, 1e6 do end end) end
  end)
  it("swallows the kit's", function()
    local env = testing.env {}
    while true do pcall(env.advance, env, 1) end
  end)
  it("yields", function() coroutine.yield() end)
  it("runs after", function() end)
end)
]])
    local code, out = proc.run({ luaop_bin, "--test-timeout", "1s", "--test", dir .. "/loop_spec.lua" }, nil,
      { deadline = 60 })
    assert.are.equal(1, code, out)
    assert.matches("not ok 1 %- l loops\n# [^\n]*loop_spec%.lua:3: the test's deadline of 1 s passed", out)
    assert.matches("not ok 2 %- l swallows\n# [^\n]*loop_spec%.lua:%d: the test's deadline of 1 s passed", out)
    assert.matches("not ok 3 %- l swallows the kit's\n# [^\n]*loop_spec%.lua:%d+: the test's deadline of 1 s passed", out)
    assert.matches("not ok 4 %- l yields\n# [^\n]*loop_spec%.lua: the test yielded", out)
    assert.matches("ok 5 %- l runs after\n", out)
    -- LUAOP_TEST_TIMEOUT: a duration, as the flag's
    for _, d in ipairs { { "1", "1" }, { "0.5s", "0.5" }, { "500ms", "0.5" } } do
      code, out = proc.run({ luaop_bin, "--test", dir .. "/loop_spec.lua" }, { LUAOP_TEST_TIMEOUT = d[1] },
        { deadline = 60 })
      assert.are.equal(1, code)
      assert.matches("loop_spec%.lua:3: the test's deadline of " .. d[2]:gsub("%.", "%%.") .. " s passed", out)
    end
    for _, bad in ipairs { "2x", "1e999", "-1", "0", "inf" } do
      local _, bout, berr = proc.run({ luaop_bin, "--test", dir .. "/loop_spec.lua" }, { LUAOP_TEST_TIMEOUT = bad },
        { deadline = 60 })
      assert.is_truthy(berr:find('LUAOP_TEST_TIMEOUT: a duration above 0 and at most 10^9 s, such as 30s or 2m, is '
        .. 'needed, not "' .. bad .. '"', 1, true), bad .. ": " .. bout .. berr)
      assert.not_matches("ok 1", bout)
    end
    local _, _, err = proc.run { luaop_bin, "--test-timeout", "0", "--test", dir }
    assert.matches("--test-timeout wants a duration above 0", err, 1, true)
  end)

  it("runs a spec from any directory: paths beside the spec first, then the working directory, else both named", function()
    proc.sh("mkdir -p " .. proc.quote(dir .. "/specs"))
    write(dir .. "/specs", "op.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "beside", resource = "v1/ConfigMap", reconcile = function() end }
]])
    write(dir, "cwd.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-cwd, namespace: default}\n")
    write(dir .. "/specs", "p_spec.lua", [[
local testing = require "luaop.testing"
describe("p", function()
  it("finds op.lua beside it and cwd.yaml in the working directory", function()
    local env = testing.env { script = "op.lua", manifests = { "cwd.yaml" } }
    assert.is_not_nil(env:get("ConfigMap", "from-cwd"))
    env:stop()
  end)
  it("names both paths it tried", function()
    testing.env { script = "missing.lua" }
  end)
end)
]])
    local ok, out = proc.sh(("cd %s && %s --test specs/p_spec.lua"):format(proc.quote(dir), proc.quote(bin)))
    assert.is_false(ok, out)
    assert.matches("ok 1 %- p finds op%.lua beside it and cwd%.yaml in the working directory\n", out)
    assert.matches("not ok 2 %- p names both paths it tried\n# specs/p_spec%.lua:9: cannot find missing%.lua: tried "
      .. "specs/missing%.lua %(beside the spec%) and missing%.lua %(the working directory%)", out)
    -- from another directory: op.lua is still found beside the spec
    ok, out = proc.sh(("cd / && %s --test %s"):format(proc.quote(bin), proc.quote(dir .. "/specs/p_spec.lua")))
    assert.is_false(ok, out)
    assert.matches("ok 1 %- p finds", out) -- (cwd.yaml from /: not found, so it fails)
    assert.matches("cannot find cwd%.yaml: tried " .. lit(dir) .. "/specs/cwd%.yaml", out)
  end)

  it("under busted too, from another directory with the documented command: the env's log under a failure", function()
    write(dir, "op.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "op", resource = "v1/ConfigMap",
  reconcile = function() error("the reconcile broke") end }
]])
    write(dir, "b_spec.lua", [[
local testing = require "luaop.testing"
describe("b", function()
  local env
  before_each(function() env = testing.env { script = "op.lua" } end)
  after_each(function() env:stop() end)
  it("fails after a reconcile error", function()
    env:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "a" } }
    assert.are.equal(1, 2)
  end)
  it("passes", function() end)
  it("raises an API error", function()
    assert(env:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "BAD_" } })
  end)
end)
]])
    local root = proc.cwd()
    local ok, out = proc.sh(("cd / && LUAOP=%s; \"$LUAOP/build/bin/lua\" \"$(command -v busted)\" "
      .. "--lpath=\"$LUAOP/lua/?.lua;$LUAOP/lua/?/init.lua\" --cpath=\"$LUAOP/build/lua/?.so\" -o TAP %s")
      :format(proc.quote(root), proc.quote(dir .. "/b_spec.lua")))
    assert.is_false(ok, out)
    assert.matches("not ok 1 %- b fails after a reconcile error\n.-# the env's errors %(%d+%):\n#   ERROR controller%.op "
      .. "Reconciler error {error=[^\n]*op%.lua:3: the reconcile broke", out)
    assert.matches("\nok 2 %- b passes\nnot ok 3", out) -- (nothing under a test that passed)
    assert.matches('not ok 3 %- b raises an API error\n.-b_spec%.lua:12: Invalid %(422%): ConfigMap "BAD_" is invalid', out)
  end)

  it("says so when there is nothing to run", function()
    local code, _, err = proc.run { luaop_bin, "--test", dir }
    assert.are.equal(1, code)
    assert.matches("no %*_spec%.lua or %*_test%.lua", err)
  end)
end)

-- issue 31's second trial: env:delete("ConfigMap", "x", "other") deleted in
-- the env's namespace, and env:patch read the namespace as the patch
describe("the test kit's writes", function()
  local t = kit.per_test(before_each, after_each)

  it("take ctx's argument order: env:delete(kind, name [, namespace] [, opts]), "
    .. "env:patch(kind, name [, namespace], patch [, opts]), or a request", function()
    t.env = testing.env { objects = {
      { apiVersion = "v1", kind = "Namespace", metadata = { name = "other" } },
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "x", namespace = "other" } },
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "x", namespace = "default" } },
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "y", namespace = "other" } },
    } }
    assert(t.env:patch("ConfigMap", "x", "other", { data = { a = "1" } }))
    assert(t.env:patch("ConfigMap", "x", { data = { b = "2" } }, { type = "merge" }))
    assert.are.same({ a = "1" }, t.env:get("ConfigMap", "x", "other").data)
    assert.are.same({ b = "2" }, t.env:get("ConfigMap", "x").data)
    assert(t.env:delete("ConfigMap", "x", "other"))
    assert.is_nil(t.env:get("ConfigMap", "x", "other"))
    assert.is_not_nil(t.env:get("ConfigMap", "x"))
    assert(t.env:delete("ConfigMap", { namespace = "other", name = "y" }, { propagation = "Foreground" }))
    assert.is_nil(t.env:get("ConfigMap", "y", "other"))
    local ok, err = pcall(t.env.delete, t.env, "ConfigMap", { namespace = "other", name = "z" }, "other")
    assert.is_false(ok)
    assert.matches("testkit_spec%.lua:%d+: env:delete%(kind, name_or_req %[, namespace%] %[, opts%]%): a request "
      .. "names its namespace: no third argument", err)
  end)
end)
