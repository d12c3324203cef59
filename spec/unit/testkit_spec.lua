-- The test kit (luaop.testing) and `luaop --test`: a script's controllers
-- against the in-memory API server on a clock that moves only when told,
-- and the runner for authors without busted. (The operators' own specs,
-- spec/unit/operators/, use the kit; here, what the kit itself promises.)
local testing = require "luaop.testing"
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

  it("says so when there is nothing to run", function()
    local code, _, err = proc.run { luaop_bin, "--test", dir }
    assert.are.equal(1, code)
    assert.matches("no %*_spec%.lua or %*_test%.lua", err)
  end)
end)
