-- luaop.definition: a controller's definition checked as luaop.controller
-- takes it, its budgets (defaults, quantities, cut to the command line's
-- limits) and what reconcile may return.
local definition = require "luaop.definition"

local function reconcile() end

local function def(fields)
  local d = { name = "c", resource = "v1/ConfigMap", reconcile = reconcile }
  for k, v in pairs(fields or {}) do d[k] = v end
  return d
end

describe("luaop.definition", function()
  it("marks a valid definition and gives it the default budgets", function()
    local d = definition.define(def())
    assert.is_true(definition.is_definition(d))
    assert.is_false(definition.is_definition(def()))
    assert.are.same({ instructions = definition.DEFAULT_INSTRUCTIONS, memory = definition.DEFAULT_MEMORY },
      definition.budgets(d))
    assert.are.same({ instructions = 100000000, memory = 64 * 1024 * 1024 },
      { instructions = definition.DEFAULT_INSTRUCTIONS, memory = definition.DEFAULT_MEMORY })
  end)

  it("reads memory as bytes or a quantity, and cuts a budget above the command line's limit to it", function()
    assert.are.equal(512 * 1024 * 1024, definition.budgets(definition.define(def { memory = "512Mi" })).memory)
    assert.are.equal(500000000, definition.budgets(definition.define(def { memory = "500M" })).memory)
    assert.are.equal(4096, definition.budgets(definition.define(def { memory = 4096 })).memory)
    local max = definition.MAX_INSTRUCTIONS
    definition.MAX_INSTRUCTIONS = 1000
    local ok, b = pcall(function() return definition.budgets(definition.define(def { instructions = 5000 })) end)
    definition.MAX_INSTRUCTIONS = max
    assert.is_true(ok, b)
    assert.are.equal(1000, b.instructions)
  end)

  it("refuses what is wrong with a definition, naming the controller and the field", function()
    local cases = {
      { "a table", 1 },
      { "needs a name", def { name = "" } },
      { "none of them a control character", def { name = "a\0b" } },
      { "needs a resource", def { resource = false } },
      { "UpperCamelCase", def { resource = "v1/configmap" } },
      { "not a Kubernetes version", def { resource = "1/ConfigMap" } },
      { "not a DNS subdomain", def { resource = "Bad_Group/v1/Thing" } },
      { "too many parts", def { resource = "a/b/c/D" } },
      { "reconcile must be a function", def { reconcile = 1 } },
      { "needs a reconcile function", def { reconcile = false } },
      { "not both", def { on_add = reconcile } },
      { "owns lists kinds", def { owns = "v1/Secret" } },
      { "owns \"v1/secret\"", def { owns = { "v1/secret" } } },
      { "watches: each is", def { watches = { { "v1/Secret" } } } },
      { "watches[1].sharded must be true or false, got", def { watches = { { "v1/Secret", map = reconcile,
        sharded = "yes" } } } },
      { "metadata_only must be true or false, got", def { metadata_only = 1 } },
      { "owns[1].metadata_only must be true or false", def { owns = { { "v1/Secret", metadata_only = "yes" } } } },
      { "watches[1].metadata_only must be true or false", def { watches = { { "v1/Secret", map = reconcile,
        metadata_only = {} } } } },
      { "trim must be { drop = { paths } } or { keep = { paths } }, got", def { trim = "data" } },
      { "trim has the string \"dorp\": only drop or keep", def { trim = { dorp = { "data" } } } },
      { "trim: give drop = {paths} or keep = {paths}, one of the two", def { trim = { drop = { "a" }, keep = { "b" } } } },
      { "trim: drop lists 1 to 64 paths", def { trim = { drop = {} } } },
      { "trim: drop \"metadata.labels\": apiVersion, kind and metadata are always kept", def { trim = { drop = {
        "metadata.labels" } } } },
      { "trim: keep \"kind\": apiVersion, kind and metadata are always kept", def { trim = { keep = { "kind" } } } },
      { "trim: path \"spec..template\": each name between dots is 1 to 253 bytes", def { trim = { drop = {
        "spec..template" } } } },
      { "trim: keep[2] is no path (a string)", def { trim = { keep = { "spec", 3 } } } },
      { "trim and metadata_only: a metadata-only cache keeps metadata alone", def { metadata_only = true,
        trim = { drop = { "data" } } } },
      { "owns[1].trim: drop lists 1 to 64 paths", def { owns = { { "v1/Secret", trim = { drop = {} } } } } },
      { "watches[1].trim has the number 1: only drop or keep", def { watches = { { "v1/Secret", map = reconcile,
        trim = { "data" } } } } },
      { "instructions must be an integer >= 1", def { instructions = 0 } },
      { "concurrency must be an integer >= 1", def { concurrency = 1.5 } },
      { "memory must be bytes", def { memory = "64 MiB" } },
      { "memory must be bytes", def { memory = "0" } },
      { "memory must be bytes", def { memory = "99999999999999Gi" } },
      { "memory must be bytes", def { memory = "64Mi\0" } },
      { "memory must be bytes", def { memory = 0 } },
      { "resync must be a number of seconds > 0", def { resync = 0 } },
    }
    for _, case in ipairs(cases) do
      local d = case[2]
      if type(d) == "table" and d.reconcile == false then d.reconcile = nil end
      if type(d) == "table" and d.resource == false then d.resource = nil end
      local ok, err = pcall(definition.define, d)
      assert.is_false(ok, case[1])
      assert.is_truthy(tostring(err):find(case[1], 1, true), ("%q does not say %q"):format(tostring(err), case[1]))
    end
  end)

  it("refuses a field written beside owns' or watches' entries instead of in one, at that list's field", function()
    local got = {}
    for _, p in ipairs(definition.problems(def { owns = { "v1/Secret", filter = "generation" },
      watches = { { "v1/Pod", map = reconcile }, map = reconcile } })) do
      assert.is_nil(p.unknown) -- refused, not taken with the field ignored
      got[#got + 1] = p.field .. " " .. p.message
    end
    assert.are.same({
      'owns controller c: owns.filter: owns is a list of entries, and filter goes in one: '
        .. 'owns = { { "v1/Secret", filter = ... } }',
      'watches controller c: watches.map: watches is a list of entries, and map goes in one: '
        .. 'watches = { { "KIND", map = ... } }',
    }, got)
    assert.has_error(function() definition.define(def { owns = { "v1/Secret", filter = "generation" } }) end)
  end)

  it("names the file and line of the definition's reconcile in its errors", function()
    local f = load("return function() end", "@ops/x.lua")()
    local ok, err = pcall(definition.define, { name = "x", resource = "v1/configmap", reconcile = f })
    assert.is_false(ok)
    assert.matches("^ops/x%.lua:1: controller x: resource", err)
  end)

  it("lists every problem of a definition, each with the field it is about", function()
    local got = {}
    for _, p in ipairs(definition.problems(def {
      resource = "v1/configmap", concurrency = 0, memory = "lots", owns = { "v1/Secret", 7 },
      watches = { { "v1/Secret" }, { "v1/Pod", map = reconcile, lable_selector = "a" } }, on_add = reconcile,
    })) do
      got[#got + 1] = ("%s %s %s"):format(tostring(p.field), tostring(p.watch), p.message)
    end
    assert.are.same({
      "resource nil controller c: resource \"v1/configmap\": the kind \"configmap\" is not an UpperCamelCase name",
      "reconcile nil controller c: reconcile or on_add/on_update/on_delete handlers, not both",
      "owns nil controller c: owns lists kinds",
      "watches nil controller c: watches: each is { kind, map = function(obj) return requests end }",
      "lable_selector 2 controller c: watches[2]: unknown field lable_selector (did you mean label_selector?)",
      "concurrency nil controller c: concurrency must be an integer >= 1",
      "memory nil controller c: memory must be bytes (an integer >= 1) or a quantity such as \"64Mi\"",
    }, got)
    assert.are.same({}, definition.problems(def { namespace = "x", label_selector = "a=b", field_selector = "c=d",
      resync = 5, watches = { { "v1/Pod", map = reconcile, namespace = "y", label_selector = "e", field_selector = "f" } } }))
  end)

  it("names each unknown field with the nearest known one", function()
    local got = {}
    for _, p in ipairs(definition.problems(def { watchs = {}, concurency = 2, reconcille = 1, lable_selector = "a",
      [1] = "x", zzz = 1 })) do
      assert.is_true(p.unknown)
      got[#got + 1] = p.message
    end
    assert.are.same({
      "controller c: unknown field [1]",
      "controller c: unknown field concurency (did you mean concurrency?)",
      "controller c: unknown field lable_selector (did you mean label_selector?)",
      "controller c: unknown field reconcille (did you mean reconcile?)",
      "controller c: unknown field watchs (did you mean watches?)",
      "controller c: unknown field zzz",
    }, got)
    assert.are.equal("ConfigMap", definition.nearest("Configmap", { "Config", "ConfigMap" }))
    assert.are.equal("Deployment", definition.nearest("Deployments", { "DaemonSet", "Deployment" }))
    assert.is_nil(definition.nearest("xyz", { "name", "resource" }))
  end)

  it("takes a definition with an unknown field at run time, and logs it", function()
    local core = require "luaop.core"
    local real, logged = core.log.write, {}
    core.log.write = function(level, name, msg, kv) logged[#logged + 1] = { level, name, msg, kv } end
    local ok, d = pcall(definition.define, def { concurency = 4 })
    core.log.write = real
    assert.is_true(ok, d)
    assert.is_true(definition.is_definition(d))
    assert.are.equal(1, #logged)
    assert.are.equal("a controller definition has a field luaop does not know: ignored", logged[1][3])
    assert.are.equal("controller c: unknown field concurency (did you mean concurrency?)", logged[1][4].problem)
    -- any other problem is still refused, with the first of them
    ok, d = pcall(definition.define, def { concurency = 4, concurrency = 0, resync = 0 })
    assert.is_false(ok)
    assert.matches("concurrency must be an integer >= 1$", d)
  end)

  it("hands every definition and its problems to collect (luaop --check) instead of raising", function()
    local got = {}
    definition.collect = function(d, problems) got[#got + 1] = { d, #problems } end
    local ok, a = pcall(definition.define, def { concurrency = 0, resync = 0 })
    local ok2, b = pcall(definition.define, def())
    definition.collect = nil
    assert.is_true(ok and ok2)
    assert.is_true(definition.is_definition(a) and definition.is_definition(b))
    assert.are.same({ { a, 2 }, { b, 0 } }, got)
    assert.has_error(function() definition.define(def { concurrency = 0 }) end)
  end)

  it("makes the markers reconcile returns: requeue_after(seconds >= 0) and requeue()", function()
    assert.are.same({ requeue_after = 2.5 }, definition.requeue_after(2.5))
    assert.are.same({ requeue = true }, definition.requeue())
    assert.has_error(function() definition.requeue_after(-1) end)
    assert.has_error(function() definition.requeue_after("1") end)
  end)

  it("raises a marker's misuse at the caller's line, saying what was given", function()
    local line = debug.getinfo(1, "l").currentline
    local errs = {
      select(2, pcall(function() local _ = definition.requeue_after("30s") end)),
      select(2, pcall(function() local _ = definition.requeue_after(-5) end)),
      select(2, pcall(function() local _ = definition.requeue_after(0 / 0) end)),
      select(2, pcall(function() local _ = definition.requeue(30) end)),
    }
    local want = {
      'requeue_after needs a number of seconds >= 0, got the string "30s"',
      "requeue_after needs a number of seconds >= 0, got the number %-5",
      "requeue_after needs a number of seconds >= 0, got the number %-?nan",
      "requeue%(%) takes no argument %(it requeues with the per%-key backoff%), got the number 30: for a delay, "
        .. "return luaop%.requeue_after%(seconds%)",
    }
    for i, err in ipairs(errs) do
      assert.matches("^spec/unit/definition_spec%.lua:" .. (line + 1 + i) .. ": " .. want[i] .. "$", err)
    end
    assert.are.same({ requeue_after = math.huge }, definition.requeue_after(math.huge))
  end)

  it("suggests a name only when it is near enough to be the one meant (issue 31's trial)", function()
    local fields, methods = definition.FIELDS, { "get", "list", "create", "update", "update_status", "patch", "apply",
      "delete", "event" }
    for word, want in pairs { watchs = "watches", lable_selector = "label_selector", concurency = "concurrency",
      reconcille = "reconcile", namespaec = "namespace", Resource = "resource", resyncs = "resync" } do
      assert.are.equal(want, definition.nearest(word, fields), word)
    end
    assert.are.equal("update", definition.nearest("udpate", methods))
    assert.are.equal("encode", definition.nearest("encdoe", { "decode", "encode", "null" }))
    local kinds = { "v1/Pod", "v1/ConfigMap", "v1/Service", "apps/v1/Deployment", "apps/v1/DaemonSet" }
    assert.are.equal("apps/v1/Deployment", definition.nearest("apps/v1/Deployments", kinds))
    assert.are.equal("v1/ConfigMap", definition.nearest("v1/Configmap", kinds))
    assert.are.equal("v1/Pod", definition.nearest("v1/Pods", kinds))
    assert.are.equal("ConfigMap", definition.nearest("ConfigMaps", { "ConfigMap", "Secret" }))
    -- what misled: a different short name two edits away
    assert.is_nil(definition.nearest("v1/Foo", kinds))
    assert.is_nil(definition.nearest("Foo", { "Pod" }))
    assert.is_nil(definition.nearest("lst", { "get" }))
    -- at most 2 edits, however long the name
    assert.is_nil(definition.nearest("reconcilerrr", { "reconcile" }))
    assert.are.equal("reconcile", definition.nearest("reconcilerr", { "reconcile" }))
    assert.is_nil(definition.nearest("label_selectr_xyz", { "label_selector" }))
  end)

  it("knows a kind's name in every form", function()
    assert.are.equal("At", definition.kind_name("cnat.programming-kubernetes.info/v1alpha1/At"))
    assert.are.equal("Pod", definition.kind_name("Pod"))
    assert.is_nil(definition.bad_kind("apps/v1/Deployment"))
    assert.is_nil(definition.bad_kind("v1beta1/Thing"))
  end)
end)

-- A field luaop does not know is logged by a running luaop and found by
-- luaop --check: both name the field's own line (the log named the line of
-- the definition's reconcile).
describe("an unknown field's line", function()
  local proc = require "support.proc"
  local testing = require "luaop.testing"

  local tail = [[
local luaop = require "luaop"
return luaop.controller {
  name = "t",
  resource = "v1/ConfigMap",
  watchs = {},
  watches = { { "v1/Secret",
    lable_selector = "a=b",
    map = function() end } },
  reconcile = function(ctx, req)
  end,
}
]]
  -- two definitions of the same fields, made by a call that is no tail call
  local two = [[
local luaop = require "luaop"
local defs = {
  luaop.controller { name = "a", resource = "v1/ConfigMap", reconcile = function() end,
    concurency = 2 },
  luaop.controller { name = "b", resource = "v1/ConfigMap", reconcile = function() end,
    concurency = 3 },
}
return defs
]]

  -- { "LINE problem" } as luaop --check says them
  local function checked(path)
    local _, out = proc.run { "build/luaop", "--check", path }
    local got = {}
    for line, msg in out:gmatch("[^\n]*:(%d+): (controller [^\n]*unknown field[^\n]*)") do got[#got + 1] = line .. " " .. msg end
    table.sort(got)
    return got
  end

  -- the same, as the kit's env:logs() has them
  local function logged(path)
    local env = testing.env { script = path }
    finally(function() env:stop() end)
    local got = {}
    for _, l in ipairs(env:logs { msg = "^a controller definition has a field luaop does not know: ignored$" }) do
      assert.are.equal(path, l.fields.script:match("^(.*):%d+$"))
      got[#got + 1] = l.fields.script:match(":(%d+)$") .. " " .. l.fields.problem
    end
    table.sort(got)
    return got
  end

  it("is the same in a running luaop's log (the kit's env:logs()) as in luaop --check's finding", function()
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. dir) end)
    local a, b = proc.write(dir, "tail.lua", tail), proc.write(dir, "two.lua", two)
    assert.are.same({
      "5 controller t: unknown field watchs (did you mean watches?)",
      "7 controller t: watches[1]: unknown field lable_selector (did you mean label_selector?)",
    }, checked(a))
    assert.are.same(checked(a), logged(a))
    assert.are.same({
      "4 controller a: unknown field concurency (did you mean concurrency?)",
      "6 controller b: unknown field concurency (did you mean concurrency?)",
    }, checked(b))
    assert.are.same(checked(b), logged(b))
  end)

  it("is the field's own line in luaop --script's log too", function()
    local luaop = require "support.luaop"
    local kube = require "support.kube"
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. dir) end)
    local path = proc.write(dir, "tail.lua", tail)
    local run = luaop.start({ path }, { offline = true })
    finally(function()
      run.stop(143)
      run.cleanup()
    end)
    local err = kube.wait_for("both unknown fields logged", 10, function()
      local _, n = run.stderr():gsub("a controller definition has a field luaop does not know: ignored", "")
      return n >= 2 and run.stderr()
    end)
    assert.matches('unknown field watchs %(did you mean watches%?%)", "script": "[^"]*tail%.lua:5"', err)
    assert.matches('unknown field lable_selector %(did you mean label_selector%?%)", "script": "[^"]*tail%.lua:7"', err)
  end)
end)

-- issue 31's second trial: the kit's load errors said less than --check
describe("a refused definition", function()
  local proc = require "support.proc"
  local testing = require "luaop.testing"
  local kit = require "support.kit"
  local t = kit.per_test(before_each, after_each)

  -- the error testing.env raises for the script text, and --check's findings
  local function refused(text)
    local path = proc.write(t.dir, "op.lua", text)
    local ok, err = pcall(testing.env, { script = path })
    assert.is_false(ok)
    local _, out = proc.run { "build/luaop", "--check", path }
    return tostring(err), out, path
  end

  it("names the field's line in the kit as --check does, the unknown fields beside a missing reconcile, and no "
    .. "traceback of luaop's own files", function()
    local err, out, path = refused [[
local luaop = require "luaop"

return luaop.controller {
  name = "typo",
  resource = "v1/ConfigMap",
  reconcille = function(ctx, req)
  end,
}
]]
    assert.are.equal(path .. ":4: controller typo needs a reconcile function (or on_add, on_update, on_delete "
      .. "handlers); " .. path .. ":6: controller typo: unknown field reconcille (did you mean reconcile?)", err)
    assert.matches(path:gsub("%p", "%%%0") .. ":6: controller typo: unknown field reconcille", out)
  end)

  it("refuses a selector or namespace that is not a string at its line, in the kit and in --check", function()
    local err, out, path = refused [[
local luaop = require "luaop"
return luaop.controller {
  name = "sel",
  resource = "v1/ConfigMap",
  label_selector = { tier = "small" },
  watches = { { "v1/Secret", namespace = 3, map = function() end } },
  reconcile = function(ctx, req)
  end,
}
]]
    local want = path .. ':5: controller sel: label_selector must be a string such as "team=a,tier in (small,large)", '
      .. "got a table"
    assert.are.equal(want, err)
    assert.matches(want:gsub("%p", "%%%0"), out)
    assert.matches(path:gsub("%p", "%%%0") .. ":6: controller sel: watches%[1%]%.namespace must be a string, got the "
      .. "number 3", out)
  end)
end)
