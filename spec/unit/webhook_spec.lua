-- Webhooks in scripts (luaop.webhook and its parts, luaop.base64, the kit's
-- env:admit and env:convert): definitions, the request handling the server
-- and the kit share, budgets, reloads, the serving loop (with a fake
-- server: core.webhook's take and reply), and the JSON patch.
local core = require "luaop.core"
local testing = require "luaop.testing"
local patch = require "luaop.webhook.patch"
local base64 = require "luaop.base64"
local webhook = require "luaop.webhook"
local wserver = require "luaop.webhook.server"

local json = core.json

-- A script of webhooks for ConfigMaps.
local HOOKS = [[
local luaop = require "luaop"
return {
  luaop.webhook.validating {
    resource = "v1/ConfigMap",
    validate = function(req, res)
      local data = req.object and req.object.data or {}
      if data.warn then res:warn("careful: " .. data.warn) end
      if data.bad then return false, "data.bad is not allowed: " .. data.bad end
      if data.raise then error("asked to raise") end
      if data.spin then while true do end end
      if data.grow then local t = {} for i = 1, 1e8 do t[i] = ("x"):rep(100) .. i end end
      if data.sleep then luaop.sleep(tonumber(data.sleep)) end
      if data.odd then return "a string" end
    end,
    timeout = 2, instructions = 1000000, memory = "4Mi",
  },
  luaop.webhook.mutating {
    resource = "v1/ConfigMap",
    mutate = function(obj)
      obj.data = obj.data or {}
      if obj.data.deny then return false, "no" end
      obj.data["a/b~c"] = obj.data["a/b~c"] or "defaulted"
      obj.metadata.labels = obj.metadata.labels or {}
      obj.metadata.labels.mutated = "yes"
      obj.data.gone = nil
    end,
  },
}
]]

local function cm(name, data)
  return { apiVersion = "v1", kind = "ConfigMap", metadata = { name = name, namespace = "default" }, data = data }
end

local function review(obj, uid)
  return json.encode { apiVersion = "admission.k8s.io/v1", kind = "AdmissionReview",
    request = { uid = uid or "u-1", kind = { group = "", version = "v1", kind = "ConfigMap" },
      resource = { group = "", version = "v1", resource = "configmaps" }, operation = "CREATE",
      object = obj, namespace = "default", name = obj.metadata.name } }
end

describe("luaop.webhook: definitions", function()
  local env
  before_each(function() env = testing.env {} end)
  after_each(function() env:stop() end)

  it("serves admission webhooks at the paths kubebuilder makes (/validate-<group, dots as dashes>-<version>-<kind>) "
    .. "and conversions at /convert", function()
    env:stop()
    env = testing.env { manifests = { "manifests/crds" } }
    env:load("hooks.lua", [[
local luaop = require "luaop"
return {
  luaop.webhook.validating { resource = "cnat.programming-kubernetes.info/v1alpha1/At", validate = function() end },
  luaop.webhook.mutating { resource = "useless.container.training/v1alpha1/Machine", mutate = function() end },
  luaop.webhook.validating { resource = "v1/Pod", validate = function() end },
  luaop.webhook.conversion { resource = "cnat.programming-kubernetes.info/At", convert = function(o) return o end },
}]])
    local paths = {}
    for p in pairs(env.manager:webhooks().paths) do paths[#paths + 1] = p end
    table.sort(paths)
    assert.are.same({ "/convert", "/mutate-useless-container-training-v1alpha1-machine",
      "/validate--v1-pod", "/validate-cnat-programming-kubernetes-info-v1alpha1-at" }, paths)
  end)

  it("refuses a wrong field at its line, and names the nearest field for a misspelt one", function()
    local p = assert(io.popen("mktemp -d"))
    local dir = p:read("l")
    p:close()
    finally(function() os.execute(("rm -rf '%s'"):format(dir)) end)
    local function load(text)
      local f = assert(io.open(dir .. "/bad.lua", "w"))
      f:write(text)
      f:close()
      local ok, err = pcall(env.load, env, dir .. "/bad.lua")
      return ok, err and err:gsub(dir:gsub("%p", "%%%0") .. "/", "")
    end
    local ok, err = load([[
local luaop = require "luaop"
return luaop.webhook.validating {
  resource = "v1/ConfigMap",
  validate = function() end,
  timeout = 60,
}]])
    assert.is_false(ok)
    assert.matches("^bad%.lua:5: webhook%.validating: timeout must be seconds", err)
    ok, err = load([[
local luaop = require "luaop"
return luaop.webhook.mutating {
  resource = "v1/ConfigMap",
  mutat = function() end,
}]])
    assert.is_false(ok)
    assert.matches("needs mutate = function", err)
    assert.matches("bad%.lua:4: webhook%.mutating: unknown field mutat %(did you mean mutate%?%)", err)
    ok, err = load([[
local luaop = require "luaop"
return luaop.webhook.conversion {
  resource = "example.com/v1/At",
  convert = function(o) return o end,
}]])
    assert.is_false(ok)
    assert.matches("bad%.lua:3: webhook%.conversion: resource \"example%.com/v1/At\": name it group/Kind", err)
  end)

  it("refuses a path a second script defines, naming both scripts", function()
    env:load("one.lua", HOOKS)
    local ok, err = pcall(env.load, env, "two.lua", [[
local luaop = require "luaop"
return luaop.webhook.validating { resource = "v1/ConfigMap", validate = function() return false, "two" end }]])
    assert.is_false(ok)
    assert.matches("two%.lua: webhook%.validating of v1/ConfigMap: /validate%-%-v1%-configmap is served by one%.lua already", err)
    assert.is_nil(env:admit(cm("x", {})).message) -- one.lua's still answers
  end)

  it("replaces a script's handlers on a reload, keeps them when a reload is broken, and removes them with the script", function()
    env:load("hooks.lua", HOOKS)
    assert.are.equal("data.bad is not allowed: 1", env:admit(cm("x", { bad = "1" })).message)
    env:load("hooks.lua", HOOKS:gsub("data.bad is not allowed", "no bad please"))
    assert.are.equal("no bad please: 1", env:admit(cm("x", { bad = "1" })).message)
    assert.has_error(function() env:load("hooks.lua", HOOKS:gsub("resource = \"v1/ConfigMap\"", "resource = 3", 1)) end)
    assert.are.equal("no bad please: 1", env:admit(cm("x", { bad = "1" })).message)
    core.task.spawn(function() assert(env.manager:set("hooks.lua", {})) end)
    env:run()
    assert.are.equal(404, (env.manager:webhooks():handle("POST", "/validate--v1-configmap", "application/json", "{}")))
  end)
end)

describe("luaop.webhook: requests", function()
  local env, reg
  before_each(function()
    env = testing.env {}
    env:load("hooks.lua", HOOKS)
    reg = env.manager:webhooks()
  end)
  after_each(function() env:stop() end)

  -- reg:handle(...) in a task, run until it answered
  local function handle(method, path, ctype, body)
    local out
    core.task.spawn(function() out = table.pack(reg:handle(method, path, ctype, body)) end)
    for _ = 1, 100 do
      env:run()
      if out then break end
      env:advance(0.5)
    end
    return table.unpack(assert(out))
  end

  it("answers a wrong method 405, a wrong content type 415, a body that is no review 400, an unknown path 404", function()
    local obj = cm("x", {})
    local s, ct, body = handle("GET", "/validate--v1-configmap", "application/json", review(obj))
    assert.are.equal(405, s)
    assert.matches("^text/plain", ct)
    assert.matches("method GET not allowed", body)
    s, ct, body = handle("POST", "/validate--v1-configmap", "text/yaml", review(obj))
    assert.are.same({ 415, "content type text/yaml" }, { s, body:match("content type [%w/]+") })
    assert.matches("^text/plain", ct)
    for _, odd in ipairs { "", ";", " ", ";charset=utf-8" } do -- (no media type at all)
      s, ct, body = handle("POST", "/validate--v1-configmap", odd, review(obj))
      assert.are.same({ 415, ("content type %s: a webhook"):format(odd) }, { s, body:match("content type .-: a webhook") })
      assert.matches("^text/plain", ct)
    end
    s, ct, body = handle("POST", "/validate--v1-configmap", "application/json", "{not json")
    assert.are.equal(400, s)
    assert.matches("the body is not JSON", body)
    assert.matches("^text/plain", ct)
    s, ct, body = handle("POST", "/validate--v1-configmap", "application/json", '{"kind":"Pod","apiVersion":"v1"}')
    assert.are.equal(400, s)
    assert.matches("not an AdmissionReview", body)
    assert.matches("^text/plain", ct)
    s, ct, body = handle("POST", "/validate-nothing", "application/json", review(obj))
    assert.are.same({ 404, "no webhook is served at /validate-nothing\n" }, { s, body })
    assert.matches("^text/plain", ct)
    s = handle("POST", "/validate--v1-configmap", "application/json; charset=utf-8", review(obj))
    assert.are.equal(200, s)
  end)

  it("echoes the uid, and answers a denial allowed false with status 403 Forbidden, the message and the warnings", function()
    local s, ct, body = handle("POST", "/validate--v1-configmap", "application/json",
      review(cm("x", { bad = "yes", warn = "w1" }), "uid-42"))
    assert.are.same({ 200, "application/json" }, { s, ct })
    local r = json.decode(body)
    assert.are.same({ apiVersion = "admission.k8s.io/v1", kind = "AdmissionReview", response = {
      uid = "uid-42", allowed = false, warnings = { "careful: w1" },
      status = { code = 403, reason = "Forbidden", message = "data.bad is not allowed: yes" } } }, r)
  end)

  it("answers a mutation with a base64 JSONPatch made from the object before and after the handler", function()
    local obj = cm("x", { gone = "1", keep = "2" })
    local s, _, body = handle("POST", "/mutate--v1-configmap", "application/json", review(obj))
    assert.are.equal(200, s)
    local r = json.decode(body).response
    assert.are.equal("JSONPatch", r.patchType)
    local ops = json.decode(base64.decode(r.patch))
    assert.are.same({
      { op = "add", path = "/data/a~1b~0c", value = "defaulted" },
      { op = "remove", path = "/data/gone" },
      { op = "add", path = "/metadata/labels", value = { mutated = "yes" } },
    }, ops)
    local after = patch.apply(obj, ops)
    assert.are.same({ ["a/b~c"] = "defaulted", keep = "2" }, after.data)
  end)

  it("answers HTTP 500 with the error as text when a handler raises, breaks its instruction or memory budget or "
    .. "passes its deadline, logs it with its traceback and counts it", function()
    for _, case in ipairs {
      { { raise = "1" }, "asked to raise" },
      { { spin = "1" }, "instruction" },
      { { grow = "1" }, "memory" },
      { { sleep = "10" }, "did not finish within its deadline of 2 s" },
      { { odd = "1" }, "validate returned the string \"a string\"" },
    } do
      local s, ct, body = handle("POST", "/validate--v1-configmap", "application/json", review(cm("x", case[1])))
      assert.are.equal(500, s)
      assert.matches("^text/plain", ct)
      assert.matches(case[2], body, 1, true)
    end
    local logged = env:logs { msg = "webhook handler failed" }
    assert.are.equal(5, #logged)
    assert.matches("stack traceback", logged[1].fields.error)
    assert.are.equal(5, env:metric("controller_runtime_webhook_requests_total",
      { webhook = "/validate--v1-configmap", code = "500" }))
    assert.are.equal(0, env:metric("controller_runtime_webhook_requests_in_flight", { webhook = "/validate--v1-configmap" }))
    assert.are.equal(5, env:metric("controller_runtime_webhook_latency_seconds_count", { webhook = "/validate--v1-configmap" }))
  end)

  it("runs the serving loop: each request a server's take hands over answered through its reply, until take gives nil", function()
    local replies, queue = {}, {}
    local wake = core.task.cond()
    local server = {}
    function server.take()
      while #queue == 0 and not server.closed do wake:wait() end
      return table.remove(queue, 1)
    end
    local function request(method, path, body)
      local req = { method = method, path = path, content_type = "application/json", body = body }
      function req.reply(_, status, ctype, text)
        replies[#replies + 1] = { status, ctype, text }
        return true
      end
      queue[#queue + 1] = req
      wake:signal()
    end
    local ended = false
    core.task.spawn(function() ended = wserver.serve(server, reg) end)
    core.task.spawn(function()
      request("POST", "/validate--v1-configmap", review(cm("x", { bad = "b" })))
      request("PUT", "/validate--v1-configmap", "{}")
      request("POST", "/nowhere", "{}")
    end)
    env:run()
    assert.are.equal(3, #replies)
    table.sort(replies, function(a, b) return a[1] < b[1] end)
    assert.are.same({ 200, 404, 405 }, { replies[1][1], replies[2][1], replies[3][1] })
    assert.is_false(json.decode(replies[1][3]).response.allowed)
    server.closed = true
    core.task.spawn(function() wake:signal() end)
    env:run()
    assert.is_true(ended)
  end)

  it("closes the webhook server at shutdown after the controllers' drain, not before", function()
    env:load("slow.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "slow", resource = "v1/ConfigMap",
  reconcile = function() luaop.sleep(5) end }]])
    env:create(cm("x", {}))
    local closed_at
    reg.server = { close = function() closed_at = closed_at or env:now() end }
    local t0 = env:now()
    core.task.spawn(function() env.manager:stop(30) end)
    env:run()
    assert.is_nil(closed_at) -- the reconcile still runs
    env:advance(5)
    assert.are.equal(t0 + 5, closed_at)
  end)

  it("lets the requests it is answering finish at shutdown, within the grace left, before the server closes", function()
    local replied, closed_at = {}, nil
    local queue, wake = {}, core.task.cond()
    local server = { close = function(self)
      closed_at = closed_at or env:now()
      self.closed = true
      wake:signal()
    end }
    function server.take()
      while #queue == 0 and not server.closed do wake:wait() end
      return table.remove(queue, 1)
    end
    local function request(data)
      local req = { method = "POST", path = "/validate--v1-configmap", content_type = "application/json",
        body = review(cm("x", data)) }
      function req.reply(_, status) replied[#replied + 1] = { status, env:now() } return true end
      queue[#queue + 1] = req
      wake:signal()
    end
    reg.server = server
    core.task.spawn(function() wserver.serve(server, reg) end)
    local t0 = env:now()
    core.task.spawn(function() request { sleep = "1.5" } end)
    env:run()
    core.task.spawn(function() env.manager:stop(30) end)
    env:run()
    assert.is_nil(closed_at) -- the request still runs
    env:advance(1)
    core.task.spawn(function() request { sleep = "1" } end) -- (come since: not waited for)
    env:run()
    env:advance(0.5)
    assert.are.same({ { 200, t0 + 1.5 } }, replied)
    assert.are.equal(t0 + 1.5, closed_at)
  end)

  it("starts the server once, when the first webhook is set, from the flags' address and certificate files", function()
    local started = 0
    local r = webhook.new { start = function() started = started + 1 end }
    assert.is_true(r:set("a.lua", {}))
    assert.are.equal(0, started)
    local defs = env.scripts["hooks.lua"]
    assert.is_true(r:set("a.lua", defs))
    assert.is_true(r:set("a.lua", defs))
    assert.are.equal(1, started)
    local w = { address = ":9443", cert = "certs/tls.crt", key = "certs/tls.key" }
    assert.are.same(w, wserver.config { webhook = w })
    assert.is_nil(wserver.config {}) -- (--webhook-bind-address=0)
  end)
end)

describe("the kit's env:admit and env:convert", function()
  local env
  before_each(function()
    env = testing.env {}
    env:load("hooks.lua", HOOKS)
  end)
  after_each(function() env:stop() end)

  it("runs the mutating webhooks of the request's kind, then the validating ones on the patched object; "
    .. "with a path, that one only; a DELETE is not mutated", function()
    local r = env:admit(cm("x", { warn = "w", gone = "g" }))
    assert.is_true(r.allowed)
    assert.are.equal(200, r.status)
    assert.are.same({ "careful: w" }, r.warnings)
    assert.are.same({ ["a/b~c"] = "defaulted", warn = "w" }, r.object.data)
    assert.are.same({ mutated = "yes" }, r.object.metadata.labels)
    assert.are.equal(3, #r.patch)
    r = env:admit(cm("x", { deny = "1" }))
    assert.are.same({ false, "no", 403 }, { r.allowed, r.message, r.code })
    r = env:admit({ operation = "CREATE", object = cm("x", { gone = "g" }) }, "/validate--v1-configmap")
    assert.is_true(r.allowed)
    assert.is_nil(r.patch)
    assert.are.same({ gone = "g" }, r.object.data)
    r = env:admit { operation = "DELETE", oldObject = cm("x", { deny = "1" }) } -- (mutate not called)
    assert.are.same({ true, nil }, { r.allowed, r.patch })
    r = env:admit(cm("x", { raise = "1" }))
    assert.are.equal(500, r.status)
    assert.is_nil(r.allowed)
    assert.matches("asked to raise", r.error, 1, true)
    local obj, err = env:convert({ apiVersion = "example.com/v1", kind = "At", metadata = { name = "a" } }, "v2")
    assert.is_nil(obj)
    assert.matches("no webhook is served at /convert", err, 1, true) -- (no script converts anything)
  end)
end)

describe("luaop.webhook: what a handler leaves behind", function()
  -- Handlers that leave values whose JSON text is far larger than their
  -- tables (one string shared by many slots), that JSON cannot hold, or
  -- that meddle with the request and the responder.
  local ODD = [[
local luaop = require "luaop"
local function shared(n) -- about n * 16 KiB of JSON text in a few KiB of tables
  local s, t = ("x"):rep(16384), {}
  for i = 1, n do t[i] = s end
  return t
end
return {
  luaop.webhook.validating {
    resource = "v1/ConfigMap", memory = "4Mi",
    validate = function(req, res)
      local data = req.object.data or {}
      res:warn("kept")
      if data.warnings then res.warnings = shared(1000) end
      if data.uid then req.uid = { req } end
    end,
  },
  luaop.webhook.mutating {
    resource = "v1/ConfigMap",
    mutate = function(obj) if obj.data and obj.data.list then return { 1, 2 } end end,
  },
  luaop.webhook.conversion {
    resource = "example.com/Thing", memory = "4Mi",
    convert = function(obj, version)
      local mode = obj.spec.mode
      if mode == "shared" then obj.spec.big = shared(1000) end
      if mode == "nan" then obj.spec.n = 0 / 0 end
      if mode == "list" then return { obj } end
      if mode == "kind" then obj.kind = "Other" end
      return obj
    end,
  },
}
]]
  local env
  before_each(function()
    env = testing.env {}
    env:load("odd.lua", ODD)
  end)
  after_each(function() env:stop() end)

  local function thing(mode)
    return { apiVersion = "example.com/v1", kind = "Thing", metadata = { name = "t" }, spec = { mode = mode } }
  end

  it("encodes the whole answer under the handler's budgets: a conversion whose text would pass its memory is a "
    .. "Failure, res.warnings and req.uid set by a handler answer nothing but res:warn's and the request's uid", function()
    local obj, err = env:convert(thing("shared"), "v2")
    assert(obj == nil, "converted, its text passing the handler's memory budget") -- (not printed: 16 MB)
    assert.matches("memory budget", err, 1, true)
    obj, err = env:convert(thing("nan"), "v2")
    assert.is_nil(obj)
    assert.matches("NaN", err, 1, true)
    obj = assert(env:convert(thing("plain"), "v2"))
    assert.are.equal("example.com/v2", obj.apiVersion)
    local r = env:admit(cm("x", { warnings = "1", uid = "1" }), "/validate--v1-configmap")
    assert.are.same({ 200, true, { "kept" } }, { r.status, r.allowed, r.warnings })
  end)

  it("refuses a list returned as the object to admit or the converted object: the handler's error (500, Failure), "
    .. "never a patch that replaces the object with a list", function()
    local r = env:admit(cm("x", { list = "1" }), "/mutate--v1-configmap")
    assert.are.same({ 500, nil }, { r.status, r.patch })
    assert.matches('mutate returned a table', r.error, 1, true)
    local obj, err = env:convert(thing("list"), "v2")
    assert.is_nil(obj)
    assert.matches("convert returned a table", err, 1, true)
  end)

  it("refuses a conversion that changes the object's kind, as the API server would, with the script's names", function()
    local obj, err = env:convert(thing("kind"), "v2")
    assert.is_nil(obj)
    assert.matches('convert changed the kind of Thing t to the string "Other"', err, 1, true)
  end)
end)

describe("luaop.webhook.patch", function()
  it("escapes ~ and / in member names, replaces a changed array whole and tells an empty array from an empty object", function()
    assert.are.equal("a~1b~0~01", patch.escape("a/b~~1"))
    local before = { a = json.array { 1, 2, 3 }, b = {}, c = "x", d = { e = 1 } }
    local after = { a = json.array { 1, 3 }, b = json.array {}, c = "x", d = { e = 2, f = json.null } }
    local ops = patch.diff(before, after)
    assert.are.same({
      { op = "replace", path = "/a", value = { 1, 3 } },
      { op = "replace", path = "/b", value = {} },
      { op = "replace", path = "/d/e", value = 2 },
      { op = "add", path = "/d/f", value = json.null },
    }, ops)
    assert.are.equal('[]', json.encode(ops[2].value))
    assert.are.same(after, patch.apply(before, ops))
    assert.are.equal("[]", json.encode(patch.diff(before, before)))
  end)

  it("round-trips base64 of every length", function()
    for _, s in ipairs { "", "a", "ab", "abc", "abcd", "\0\255\128x" } do
      assert.are.equal(s, base64.decode(base64.encode(s)))
    end
    assert.are.equal("W3sib3AiOiJhZGQifV0=", base64.encode('[{"op":"add"}]'))
    assert.is_nil(base64.decode("a$"))
  end)
end)
