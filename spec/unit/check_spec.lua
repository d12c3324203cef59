-- `luaop --check PATH...`: scripts checked with no cluster and no
-- kubeconfig, each finding as file:line: message; and, in --script mode, a
-- script that does not compile named before any kubeconfig is looked for.
local proc = require "support.proc"

-- No kubeconfig anywhere: none in the environment, a home without one, not
-- in a Pod.
local NO_CLUSTER = { KUBECONFIG = false, HOME = "/nonexistent", KUBERNETES_SERVICE_HOST = false }

local OK = [[
local luaop = require "luaop"
return luaop.controller {
  name = "%s",
  resource = "v1/ConfigMap",
  reconcile = function(ctx, req)
    local cm = ctx:get("ConfigMap", req)
    if not cm then return end
  end,
}
]]

for _, bin in ipairs { "build/luaop", "build/asan/luaop" } do
  describe(bin .. " --check", function()
    local dir
    before_each(function() dir = proc.tempdir() end)
    after_each(function() proc.sh("rm -rf " .. dir) end)

    local function write(name, text)
      local f = assert(io.open(dir .. "/" .. name, "w"))
      f:write(text)
      f:close()
      return dir .. "/" .. name
    end

    local function check(...)
      return proc.run({ bin, "--check", ... }, NO_CLUSTER)
    end

    it("passes the shipped operators, one by one and as a directory, with no kubeconfig", function()
      local code, out, err = check("operators/")
      assert.are.equal(0, code, out .. err)
      assert.are.equal("", out)
      assert.matches("luaop %-%-check: 4 scripts, 0 findings", err)
      for _, f in ipairs { "at", "useless-machine", "secret-copy", "pod-watcher" } do
        code, out = check("operators/" .. f .. ".lua")
        assert.are.equal(0, code, f .. ": " .. out)
      end
    end)

    it("finds a syntax error, with file and line, on a machine with no kubeconfig", function()
      local path = write("broken.lua", OK:format("broken"):gsub("if not cm then return end", "if not cm then return"))
      local code, out, err = check(path)
      assert.are.equal(1, code)
      assert.are.equal(path .. ":8: unexpected symbol near ','\n", out)
      assert.matches("1 script, 1 finding", err)
      assert.not_matches("Kubernetes configuration", err)
    end)

    it("finds unknown globals, globals set, and what the sandbox refuses, wherever they are in the code", function()
      local path = write("globals.lua", [[
local luaop = require "luaop"
helper = function() return 1 end
return luaop.controller {
  name = "g",
  resource = "v1/ConfigMap",
  reconcile = function(ctx, req)
    if req.name == "never" then
      print(os.time(), string.format("%d", helper()))
      return lauop.requeue_after(5)
    end
    io.write("x")
  end,
}
]])
      local code, out = check(path)
      assert.are.equal(1, code)
      assert.are.equal(table.concat({
        path .. ":2: setting global helper: declare it local",
        path .. ":9: unknown global lauop",
        path .. ":11: io is not available to luaop scripts (no files in the sandbox)",
      }, "\n") .. "\n", out)
    end)

    it("checks webhook definitions: a misspelt field, a kind not served, a value out of range, each at its line, "
      .. "and a path two scripts define", function()
      write("hooks.lua", [[
local luaop = require "luaop"
return {
  luaop.webhook.validating {
    resource = "v1/ConfigMap",
    validate = function(req) return true end,
    timout = 3,
  },
  luaop.webhook.mutating {
    resource = "v1/ConfigMapp",
    mutate = function(obj) end,
  },
  luaop.webhook.mutating {
    resource = "v1/Secret",
    mutate = function(obj) end,
    timeout = 0,
  },
  luaop.webhook.conversion { resource = "cnat.programming-kubernetes.info/At", convert = function(o) return o end },
}
]])
      write("other.lua", [[
local luaop = require "luaop"
return luaop.webhook.conversion { resource = "cnat.programming-kubernetes.info/At", convert = function(o) return o end }
]])
      local code, out = check(dir)
      assert.are.equal(1, code)
      assert.are.same({
        dir .. "/hooks.lua:6: webhook.validating: unknown field timout (did you mean timeout?)",
        dir .. "/hooks.lua:9: webhook.mutating: resource: kind v1/ConfigMapp is not served by Kubernetes",
        dir .. "/hooks.lua:15: webhook.mutating: timeout must be seconds, more than 0 and at most 30",
        dir .. "/other.lua: webhook.conversion of cnat.programming-kubernetes.info/At: the conversion of "
          .. "cnat.programming-kubernetes.info/At is served by " .. dir .. "/hooks.lua too: a path is one script's",
      }, (function()
        local lines = {}
        for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l:gsub(" v[%d.]+ .*$", ""):gsub("30 %(keep.*$", "30") end
        return lines
      end)())
    end)

    it("validates each definition and names the line of the field at fault", function()
      local cases = {
        { "name = \"d\"", "name = \"d\\0x\"", ":4: controller \"d\\0x\": name is 1 to 253 characters, none of them a control character" },
        { "resource = \"v1/ConfigMap\"", "resource = \"v1/configmap\"",
          ":5: controller d: resource \"v1/configmap\": the kind \"configmap\" is not an UpperCamelCase name" },
        { "resource = \"v1/ConfigMap\"", "resource = \"Apps_V1/v1/Deployment\"",
          ":5: controller d: resource \"Apps_V1/v1/Deployment\": the group \"Apps_V1\" is not a DNS subdomain" },
        { "resource = \"v1/ConfigMap\"", "resource = \"1/ConfigMap\"",
          ":5: controller d: resource \"1/ConfigMap\": the version \"1\" is not a Kubernetes version" },
        { "name = \"d\",", "name = (\"x\"):rep(254),",
          ":4: controller \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\": name is 1 to 253 characters" },
        { "name = \"d\",", "name = \"d\\n\",",
          ":4: controller \"d\\10\": name is 1 to 253 characters, none of them a control character" },
        { "resource = \"v1/ConfigMap\",", "resource = \"v1/ConfigMap\",\n  concurrency = 0,",
          ":6: controller d: concurrency must be an integer >= 1" },
        { "resource = \"v1/ConfigMap\",", "resource = \"v1/ConfigMap\",\n  owns = { \"v1/pod\" },",
          ":6: controller d: owns \"v1/pod\": the kind \"pod\" is not an UpperCamelCase name" },
        { "resource = \"v1/ConfigMap\",", "resource = \"v1/ConfigMap\",\n  memory = \"lots\",",
          ":6: controller d: memory must be bytes" },
        { "resource = \"v1/ConfigMap\",", "resource = \"v1/ConfigMap\",\n  instructions = 1.5,",
          ":6: controller d: instructions must be an integer >= 1" },
        { "resource = \"v1/ConfigMap\",", "resource = \"v1/ConfigMap\",\n  watches = { { \"v1/Secret\" } },",
          ":6: controller d: watches: each is { kind, map = function(obj) return requests end }" },
      }
      for _, c in ipairs(cases) do
        local text = ("\n"):rep(1) .. OK:format("d"):gsub(c[1]:gsub("%p", "%%%0"), (c[2]:gsub("%%", "%%%%")))
        local path = write("def.lua", text)
        local code, out = check(path)
        assert.are.equal(1, code, c[2])
        assert.are.equal(1, select(2, out:gsub("\n", "")), out)
        assert.are.equal(path .. c[3], out:sub(1, #path + #c[3]), c[2])
      end
    end)

    it("reports every class of finding in one run, each at the line of the field or call at fault", function()
      local path = write("all.lua", [[
local luaop = require "luaop"
local function encode(x) return luaop.json.encdoe(x) end
return luaop.controller {
  name = "d",
  resource = "apps/v1/Deployments",
  owns = { "v1/Configmap" },
  watchs = { { "v1/Secret", map = function(o, ctx) return ctx:lst("v1/Secret") end } },
  watches = { { "v1/Secret", lable_selector = "a=b", map = function() end } },
  concurency = 2,
  memory = "lots",
  reconcille = 1,
  reconcile = function(ctx, req)
    local cm = ctx:get("Deploymnet", req)
    ctx.log:infoo("x", { cm = encode(cm) })
    lauop.requeue()
    local later = function() return ctx:udpate(cm) end
    return luaop.requeue_afterr(1), later
  end,
}
]])
      local code, out, err = check(path)
      assert.are.equal(1, code)
      assert.are.equal(table.concat({
        path .. ":2: unknown function luaop.json.encdoe (did you mean luaop.json.encode?)",
        path .. ":5: controller d: resource: kind apps/v1/Deployments is not served by Kubernetes v1.37.2 "
          .. "(did you mean apps/v1/Deployment?)",
        path .. ":6: controller d: owns: kind v1/Configmap is not served by Kubernetes v1.37.2 (did you mean v1/ConfigMap?)",
        path .. ":7: unknown ctx method lst (did you mean list?)",
        path .. ":7: controller d: unknown field watchs (did you mean watches?)",
        path .. ":8: controller d: watches[1]: unknown field lable_selector (did you mean label_selector?)",
        path .. ":9: controller d: unknown field concurency (did you mean concurrency?)",
        path .. ":10: controller d: memory must be bytes (an integer >= 1) or a quantity such as \"64Mi\"",
        path .. ":11: controller d: unknown field reconcille (did you mean reconcile?)",
        path .. ":13: ctx:get: kind Deploymnet is not served by Kubernetes v1.37.2 (did you mean Deployment?)",
        path .. ":14: unknown method ctx.log:infoo (did you mean ctx.log:info?)",
        path .. ":15: unknown global lauop",
        path .. ":16: unknown ctx method udpate (did you mean update?)",
        path .. ":17: unknown function luaop.requeue_afterr (did you mean luaop.requeue_after?)",
      }, "\n") .. "\n", out)
      assert.matches("1 script, 14 findings\n$", err)
    end)

    it("follows luaop and ctx as locals, parameters and upvalues of those names only, and checks constant kinds only", function()
      local path = write("names.lua", [[
local luaop = require "luaop"
local l = luaop
local function later(ctx)
  return function()
    ctx:patchh("v1/Secret")
    return luaop.jsn.encode({}), l.nothing, luaop.json.decode("{}")
  end
end
return luaop.controller {
  name = "n", resource = "v1/ConfigMap",
  reconcile = function(ctx, req)
    local kind = "v1/Secrt"
    local log = ctx.log
    log:nothing()
    ctx:list(kind)
    ctx:delete("v1/Secrt", req)
    luaop.log:infoo("x")
    return later(ctx)
  end,
}
]])
      local code, out = check(path)
      assert.are.equal(1, code)
      assert.are.equal(table.concat({
        path .. ":5: unknown ctx method patchh (did you mean patch?)",
        path .. ":6: unknown field luaop.jsn (did you mean luaop.json?)",
        path .. ":16: ctx:delete: kind v1/Secrt is not served by Kubernetes v1.37.2 (did you mean v1/Secret?)",
        path .. ":17: unknown method luaop.log:infoo (did you mean luaop.log:info?)",
      }, "\n") .. "\n", out)
    end)

    it("takes a ctx that may not be luaop's: a method near a real one is an error, other unknowns warnings", function()
      local path = write("ctx.lua", [[
local luaop = require "luaop"
local function helper(ctx) return ctx.name, ctx:render(), ctx.name end
local function ensure(ctx, ns) return ctx:udpate(ns), ctx.log:infoo("x"), ctx.log:debugg("y") end
return luaop.controller { name = "c", resource = "v1/ConfigMap", reconcile = function(ctx, req)
  ctx.seen = (ctx.seen or 0) + 1
  ctx.cache = ctx.cache or {}
  ctx.cache.n = ctx.cache.n
  ctx.log.extra = ctx.log.extra
  ctx.log:whatever(ctx.lgo, ctx.name)
  return helper({ name = "x", render = function() end }), ensure(ctx, req), luaop.nothing
end }
]])
      local code, out, err = check(path)
      assert.are.equal(1, code)
      local own = ": if this ctx is not luaop's, rename it (only luaop's ctx is checked)"
      assert.are.equal(table.concat({
        path .. ":2: warning: unknown ctx field name" .. own .. "; 2 other places in this script use it too",
        path .. ":2: warning: unknown ctx method render" .. own,
        path .. ":3: unknown ctx method udpate (did you mean update?)",
        path .. ":3: unknown method ctx.log:infoo (did you mean ctx.log:info?)",
        path .. ":3: unknown method ctx.log:debugg (did you mean ctx.log:debug?)",
        path .. ":9: warning: unknown method ctx.log:whatever" .. own,
        path .. ":9: warning: unknown ctx field lgo (did you mean log?)" .. own,
        path .. ":10: unknown function luaop.nothing",
      }, "\n") .. "\n", out)
      assert.matches("1 script, 4 findings, 4 warnings\n$", err)
      -- warnings alone: exit 0
      write("ctx.lua", (proc.read(path):gsub("udpate", "update"):gsub("infoo", "info"):gsub("debugg", "debug")
        :gsub(", luaop.nothing", "")))
      code, out, err = check(path)
      assert.are.equal(0, code, out)
      assert.matches("1 script, 0 findings, 4 warnings\n$", err)
    end)

    it("says an unserved kind's warning once a script, at its first line, with how many other places use it", function()
      local path = write("kinds.lua", [[
local luaop = require "luaop"
return luaop.controller {
  name = "k", resource = "v1/ConfigMap", owns = { "cert-manager.io/v1/Certificate" },
  reconcile = function(ctx, req)
    ctx:get("Certificate", req)
    ctx:get("Issuer", req)
    ctx:list("Certificate")
    ctx:get("cert-manager.io/v1/Certificate", req)
    return ctx:delete("Certificate", req), ctx:get("Secrets", req), ctx:get("Secrets", req)
  end,
}
]])
      local code, out, err = check(path)
      assert.are.equal(1, code)
      local bare = ": neither Kubernetes v1.37.2 nor a CRD found serves it, so it is not checked (give luaop --check "
        .. "its CRDs with --crds DIR)"
      assert.are.equal(table.concat({
        path .. ":3: warning: controller k: owns: kind cert-manager.io/v1/Certificate: no CRD found defines the group "
          .. "cert-manager.io, so it is not checked (give luaop --check the vendor's CRDs with --crds DIR); 1 other "
          .. "place in this script uses it too",
        path .. ":5: warning: ctx:get: kind Certificate" .. bare .. "; 2 other places in this script use it too",
        path .. ":6: warning: ctx:get: kind Issuer" .. bare,
        path .. ":9: ctx:get: kind Secrets is not served by Kubernetes v1.37.2 (did you mean Secret?)",
        path .. ":9: ctx:get: kind Secrets is not served by Kubernetes v1.37.2 (did you mean Secret?)",
      }, "\n") .. "\n", out)
      assert.matches("1 script, 2 findings, 3 warnings\n$", err)
    end)

    it("refuses a constant kind given to ctx that is not Kind, version/Kind or group/version/Kind", function()
      local path = write("form.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "f", resource = "v1/ConfigMap", reconcile = function(ctx, req)
  ctx:get("configmap", req)
  ctx:patch("apps/v1/deployment", req, {})
  ctx:list("a/b/c/D")
  return ctx:get("v1/ConfigMap", req)
end }
]])
      local code, out = check(path)
      assert.are.equal(1, code)
      assert.are.equal(table.concat({
        path .. ":3: ctx:get: kind configmap: the kind \"configmap\" is not an UpperCamelCase name (did you mean ConfigMap?)",
        path .. ":4: ctx:patch: kind apps/v1/deployment: the kind \"deployment\" is not an UpperCamelCase name "
          .. "(did you mean apps/v1/Deployment?)",
        path .. ":5: ctx:list: kind a/b/c/D: too many parts: want Kind, version/Kind or group/version/Kind",
      }, "\n") .. "\n", out)
    end)

    it("refuses ctx:event's constant arguments that Kubernetes would not take, at the call's line", function()
      local path = write("events.lua", [[
local luaop = require "luaop"
return luaop.controller { name = "e", resource = "v1/ConfigMap", reconcile = function(ctx, req)
  local cm = ctx:get("ConfigMap", req)
  ctx:event(cm, "Info", "Created", "a type Kubernetes has not")
  ctx:event(cm, "Normal", "pod created", "a reason that is not CamelCase")
  ctx:event(cm, "Normal")
  ctx:event("Normal", cm, "Created", "the object not first")
  ctx:event(cm, "Created", "Normal", "type and reason swapped")
  ctx:event(cm, "Normal", "Created", "an action not CamelCase", "re-create")
  ctx:event(cm,
    "Warning", "bad reason", { note = "a table" })
  ctx:event(cm, "Normal", "Created", "ok", "Create") -- (these pass: right, or not constants)
  local kind, why = "Normal", "Created"
  ctx:event(cm, kind, why, "-- a comment's text in a string: ctx:event(cm, 'x')")
  ctx:event(cm, "Warning", string.format("Failed%d", 2))
  return ctx:event(cm, "Normal", luaop.json.encode("x"))
end }
]])
      local code, out = check(path)
      assert.are.equal(1, code)
      local form = "ctx:event%(obj, type, reason, note %[, action%]%): "
      local want = {
        { 4, 'type must be "Normal" or "Warning", got the string "Info"' },
        { 5, 'reason must be one UpperCamelCase word of at most 128 characters, as Kubernetes requires %(such as '
          .. '"PodCreated"%), got the string "pod created"' },
        { 6, "reason must be one UpperCamelCase word .*, got nil" },
        { 7, 'obj must be the object the Event is about %(a table%), got the string "Normal": the object comes first, then the type' },
        { 8, 'type must be "Normal" or "Warning", got the string "Created": type and reason swapped%? '
          .. '%(ctx:event%(obj, "Normal", "Created", ...%)%)' },
        { 9, 'action must be one UpperCamelCase word .*, got the string "re%-create"' },
        { 10, 'reason must be one UpperCamelCase word .*, got the string "bad reason"' },
      }
      local lines = {}
      for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
      assert.are.equal(#want, #lines, out)
      for i, w in ipairs(want) do
        assert.matches("^" .. path:gsub("%p", "%%%0") .. ":" .. w[1] .. ": " .. form .. w[2] .. "$", lines[i])
      end
    end)

    it("runs the top level after the static findings, and says a fault it raises on once", function()
      local path = write("top.lua", [[
local luaop = require "luaop"
local x = lauop.version
luaop.controllr { name = "a" }
return luaop.controller { name = "t", resource = "v1/ConfigMap", reconcile = function() end }
]])
      local code, out = check(path)
      assert.are.equal(1, code)
      assert.are.equal(path .. ":2: unknown global lauop\n" .. path .. ":3: unknown function luaop.controllr "
        .. "(did you mean luaop.controller?)\n", out)
      -- a raise the static reading does not foresee is reported beside what it found
      path = write("raises.lua", [[
local luaop = require "luaop"
local function f() return lauop end
local d = luaop.controller { name = "r", resource = "v1/ConfigMap", concurrency = 0, reconcile = f }
error("boom")
]])
      code, out = check(path)
      assert.are.equal(1, code)
      assert.are.equal(path .. ":2: unknown global lauop\n" .. path .. ":3: controller r: concurrency must be an "
        .. "integer >= 1\n" .. path .. ":4: boom\n", out)
    end)

    it("reports every problem of every definition of a script", function()
      local path = write("defs.lua", [[
local luaop = require "luaop"
return {
  luaop.controller {
    name = "one", resource = "v1/configmap",
    concurrency = 1.5,
    reconcile = function() end,
  },
  luaop.controller {
    name = "two", resource = "v1/Secret",
    resync = -1,
    on_add = function() end,
    reconcile = function() end,
  },
}
]])
      local code, out = check(path)
      assert.are.equal(1, code)
      assert.are.equal(table.concat({
        path .. ":4: controller one: resource \"v1/configmap\": the kind \"configmap\" is not an UpperCamelCase name",
        path .. ":5: controller one: concurrency must be an integer >= 1",
        path .. ":10: controller two: resync must be a number of seconds > 0",
        path .. ":12: controller two: reconcile or on_add/on_update/on_delete handlers, not both",
      }, "\n") .. "\n", out)
    end)

    it("knows the kinds of the CRDs in manifests/ beside the scripts or given with --crds; an unknown group warns", function()
      proc.sh("mkdir -p " .. dir .. "/ops " .. dir .. "/manifests/crds " .. dir .. "/vendor")
      local crd = [[
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: %ss.%s }
spec:
  group: %s
  names: { kind: %s, plural: %ss }
  scope: Namespaced
  versions:
    - { name: v1, served: true, storage: true }
    - { name: v1alpha1, served: false, storage: false }
---
apiVersion: v1
kind: ConfigMap
metadata: { name: not-a-crd }
]]
      write("manifests/crds/widget.yaml", crd:format("widget", "example.com", "example.com", "Widget", "widget"))
      write("manifests/kustomization.yaml", "{{ not yaml, and not a CRD: left alone\n")
      write("vendor/cert.yaml", crd:format("certificate", "cert-manager.io", "cert-manager.io", "Certificate",
        "certificate"))
      local path = write("ops/w.lua", [[
local luaop = require "luaop"
return luaop.controller {
  name = "w",
  resource = "example.com/v1/Widget",
  owns = { "cert-manager.io/v1/Certificate" },
  watches = { { "example.com/v1alpha1/Widget", map = function() end } },
  reconcile = function(ctx, req) return ctx:get("example.com/v1/Widgets", req) end,
}
]])
      local code, out, err = check(dir .. "/ops")
      assert.are.equal(1, code)
      local group = " is not served by the CRDs found of the group example.com (" .. dir .. "/manifests/crds/widget.yaml)"
      assert.are.equal(table.concat({
        path .. ":5: warning: controller w: owns: kind cert-manager.io/v1/Certificate: no CRD found defines the group "
          .. "cert-manager.io, so it is not checked (give luaop --check the vendor's CRDs with --crds DIR)",
        path .. ":6: controller w: watches: kind example.com/v1alpha1/Widget" .. group
          .. " (did you mean example.com/v1/Widget?)",
        path .. ":7: ctx:get: kind example.com/v1/Widgets" .. group .. " (did you mean example.com/v1/Widget?)",
      }, "\n") .. "\n", out)
      assert.matches("1 script, 2 findings, 1 warning\n$", err)
      -- a warning alone exits 0; the vendor's CRDs given, not even that
      write("ops/w.lua", (proc.read(path):gsub("example%.com/v1alpha1/Widget", "example.com/v1/Widget")
        :gsub("Widgets", "Widget")))
      code, out, err = check(dir .. "/ops")
      assert.are.equal(0, code, out)
      assert.matches(":5: warning: ", out)
      assert.matches("1 script, 0 findings, 1 warning\n$", err)
      code, out, err = check("--crds", dir .. "/vendor/cert.yaml", path)
      assert.are.equal(0, code, out)
      assert.are.equal("", out)
      assert.matches("1 script, 0 findings\n$", err)
      -- a --crds path that cannot be read, or does not parse, is a finding
      code, out = check("--crds", dir .. "/missing", "--crds", dir .. "/manifests", path)
      assert.are.equal(1, code)
      local lines = {}
      for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
      assert.are.equal(3, #lines, out) -- (and the warning)
      assert.are.equal("--crds " .. dir .. "/missing: cannot read it", lines[1])
      assert.matches("^" .. dir:gsub("%p", "%%%0") .. "/manifests/kustomization%.yaml: line %d+: ", lines[2])
    end)

    it("reads the manifests of a CRD directory, follows no link to a directory in it, and stops at its limits", function()
      proc.sh("mkdir -p " .. dir .. "/ops " .. dir .. "/manifests/deep/1/2/3/4/5/6/7/8/9 " .. dir .. "/elsewhere")
      local crd = [[{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "spec": {"group": "%s", "names": {"kind": "%s"}, "versions": [{"name": "v1", "served": true}]}}
]]
      write("manifests/widget.json", crd:format("example.com", "Widget"))
      write("manifests/gizmo.txt", crd:format("example.net", "Gizmo"))
      write("elsewhere/gadget.yaml", crd:format("example.org", "Gadget"))
      write("elsewhere/part.yaml", crd:format("example.io", "Part"))
      proc.sh("ln -s ../elsewhere " .. dir .. "/manifests/linked && ln -s .. " .. dir .. "/manifests/loop && ln -s "
        .. "../elsewhere/part.yaml " .. dir .. "/manifests/part.yaml")
      local path = write("ops/m.lua", [[
local luaop = require "luaop"
return luaop.controller {
  name = "m", resource = "example.com/v1/Widget",
  owns = { "example.net/v1/Gizmo", "example.org/v1/Gadget", "example.io/v1/Part" },
  reconcile = function() end,
}
]])
      local code, out = check(dir .. "/ops")
      assert.are.equal(1, code)
      local lines = {}
      for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
      assert.are.equal(3, #lines, out)
      assert.are.equal(dir .. "/manifests: directories more than 8 deep: not read past them, so kinds of CRDs there "
        .. "are not known (give the directory that holds the CRDs)", lines[1])
      assert.matches("^" .. path:gsub("%p", "%%%0") .. ":4: warning: controller m: owns: kind example.net/v1/Gizmo: ",
        lines[2])
      assert.matches("^" .. path:gsub("%p", "%%%0") .. ":4: warning: controller m: owns: kind example.org/v1/Gadget: ",
        lines[3])
      -- a --crds path given as a link is followed; so many manifests are cut short
      proc.sh("rm -r " .. dir .. "/manifests/deep && cd " .. dir .. "/elsewhere && for i in $(seq 1001); do "
        .. ": > m$i.yaml; done")
      code, out = check("--crds", dir .. "/manifests/linked", dir .. "/ops")
      assert.are.equal(1, code)
      assert.are.equal("--crds " .. dir .. "/manifests/linked: more than 1000 manifests: not read past them, so kinds "
        .. "of CRDs there are not known (give the directory that holds the CRDs)\n" .. path .. ":4: warning: "
        .. "controller m: owns: kind example.net/v1/Gizmo: no CRD found defines the group example.net, so it is not "
        .. "checked (give luaop --check the vendor's CRDs with --crds DIR)\n", out)
    end)

    it("finds two controllers of one name across scripts, a script that returns none, and no scripts at all", function()
      write("a.lua", OK:format("same"))
      write("b.lua", OK:format("same"))
      write("c.lua", "return 42\n")
      local code, out = check(dir)
      assert.are.equal(1, code)
      assert.matches(dir .. "/b%.lua: two controllers are named same %(the other in " .. dir .. "/a%.lua%)\n", out)
      assert.matches(dir .. "/c%.lua: the script returns no controller definition", out)
      local empty = proc.tempdir()
      code, out = check(empty)
      proc.sh("rm -rf " .. empty)
      assert.are.equal(1, code)
      assert.matches("no %*%.lua script to check", out)
      code, out = check(dir .. "/missing.lua")
      assert.are.equal(1, code)
      assert.matches("cannot read script .*missing%.lua", out)
    end)

    it("gives a script's top level 10 s, and names one that waits", function()
      local path = write("sleeps.lua", "local luaop = require 'luaop'\nluaop.sleep(1e9)\n")
      local code, out = check(path)
      assert.are.equal(1, code)
      assert.are.equal(path .. ": its top level did not finish within 10 s: it waits, and a top level only defines "
        .. "controllers\n", out)
    end)

    it("runs a script's top level under the load budget", function()
      local path = write("loop.lua", "while true do end\n")
      local code, out = check(path)
      assert.are.equal(1, code)
      assert.matches("^" .. path:gsub("%p", "%%%0") .. ":1: .*instruction budget", out)
    end)

    it("needs a path, and does not go with --program", function()
      local code, _, err = proc.run { bin, "--check" }
      assert.are.equal(2, code)
      assert.matches("%-%-check needs a script or a directory", err)
      code, _, err = proc.run { bin, "--check", "--program", "x.lua" }
      assert.are.equal(2, code)
      assert.matches("%-%-check checks scripts: not with %-%-program", err)
    end)

    it("in --script mode, names a script that does not compile before looking for a kubeconfig", function()
      local path = write("broken.lua", "return {\n")
      local code, _, err = proc.run({ bin, "--script", path }, NO_CLUSTER)
      assert.are.equal(1, code)
      assert.matches("cannot load scripts", err)
      assert.matches(path:gsub("%p", "%%%0") .. ":2: ", err)
      assert.not_matches("Kubernetes configuration", err)
      -- a script that compiles gets as far as the kubeconfig
      code, _, err = proc.run({ bin, "--script", write("ok.lua", OK:format("ok")) }, NO_CLUSTER)
      assert.are.equal(1, code)
      assert.matches("no Kubernetes configuration", err)
    end)
  end)
end
