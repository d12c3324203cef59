-- Webhooks in scripts, called by the real API server: a luaop on this
-- machine serves operators/webhooks/*.lua over TLS (a certificate from
-- hack/certs.sh), and webhook configurations reach it by URL on the
-- loopback. On the shared control plane nothing of another spec's is
-- touched: the At and Machine CRDs are copies under a group of this run's,
-- the configurations select this run's namespace only, and all of it goes
-- at the end. The scripts are the shipped ones with the group renamed.
local kube = require "support.kube"
local luaop = require "support.luaop"
local proc = require "support.proc"
local volume = require "support.volume"
local core = require "luaop.core"

local json = core.json

local token = ("%d%04d"):format(os.time() % 100000000, math.random(0, 9999))
local GROUP = "w" .. token .. ".e2e.luaop.dev"
local MGROUP = "m" .. token .. ".e2e.luaop.dev"
local LABEL = "luaop.dev/e2e-webhooks"
-- (the copies' kinds are renamed too: kubectl resolves "at" and "machine"
-- by kind in every group, and its discovery cache would keep naming these
-- copies for later specs after they are gone)
local AT, MACHINE = "HookAt", "HookMachine"

-- The shipped scripts, moved to this run's groups and kinds.
local function at_script(text)
  return (text:gsub("cnat%.programming%-kubernetes%.info", GROUP):gsub('/At"', "/" .. AT .. '"'))
end
local function machine_script(text)
  return (text:gsub("useless%.container%.training", MGROUP):gsub('/Machine"', "/" .. MACHINE .. '"'))
end

-- A CRD's names for kind
local function names(kind)
  return { kind = kind, listKind = kind .. "List", plural = kind:lower() .. "s", singular = kind:lower() }
end

local function read(path)
  local f = assert(io.open(path))
  local s = f:read("a")
  f:close()
  return s
end

local function yaml(path)
  return core.yaml.decode(read(path))[1]
end

-- A handler of ConfigMaps, for what failurePolicy decides.
local FAULTY = [[
local luaop = require "luaop"
return luaop.webhook.validating {
  resource = "v1/ConfigMap", timeout = 2, instructions = 1000000,
  validate = function(req)
    local data = req.object.data or {}
    if data.raise then error("asked to raise") end
    if data.spin then while true do end end
    if data.sleep then luaop.sleep(5) end
    if data.deny then return false, "denied: " .. data.deny end
  end,
}
]]

describe("webhooks on the API server", function()
  local ns, certs, vol, run, port, ca, hooks = nil, nil, nil, nil, nil, nil, {}

  local function scripts(at_text)
    return {
      ["at-webhooks.lua"] = at_text or at_script(read("operators/webhooks/at-webhooks.lua")),
      ["machine-webhooks.lua"] = machine_script(read("operators/webhooks/machine-webhooks.lua")),
      ["faulty.lua"] = FAULTY,
    }
  end

  local function url(path) return ("https://127.0.0.1:%d%s"):format(port, path) end

  -- the At CRD under GROUP, with v1alpha2 {runAt, command} beside the stored v1alpha1, converted by /convert
  local function at_crd()
    local crd = yaml("manifests/crds/at.yaml")
    crd.metadata.name = "hookats." .. GROUP
    crd.spec.group, crd.spec.names = GROUP, names(AT)
    local v2 = json.decode(json.encode(crd.spec.versions[1]))
    v2.name, v2.storage = "v1alpha2", false
    local spec = v2.schema.openAPIV3Schema.properties.spec
    spec.properties.runAt, spec.properties.schedule = spec.properties.schedule, nil
    for i, r in ipairs(spec.required or {}) do
      if r == "schedule" then spec.required[i] = "runAt" end
    end
    for _, c in ipairs(v2.additionalPrinterColumns or {}) do c.jsonPath = c.jsonPath:gsub("%.spec%.schedule", ".spec.runAt") end
    crd.spec.versions[2] = v2
    crd.spec.conversion = { strategy = "Webhook", webhook = { conversionReviewVersions = { "v1" },
      clientConfig = { url = url("/convert"), caBundle = ca } } }
    return crd
  end

  local function machine_crd()
    local crd = yaml("manifests/crds/machine.yaml")
    crd.metadata.name = "hookmachines." .. MGROUP
    crd.spec.group, crd.spec.names = MGROUP, names(MACHINE)
    return crd
  end

  local function hook(path, group, resource, operations, policy, selector)
    return { name = path:gsub("^/", ""):gsub("%-%-", "-") .. "." .. token .. ".e2e.luaop.dev",
      clientConfig = { url = url(path), caBundle = ca }, failurePolicy = policy or "Fail", sideEffects = "None",
      admissionReviewVersions = { "v1" }, timeoutSeconds = 10, matchPolicy = "Equivalent",
      namespaceSelector = { matchLabels = { [LABEL] = token } }, objectSelector = selector,
      rules = { { apiGroups = { group }, apiVersions = { "*" }, resources = { resource }, operations = operations } } }
  end

  setup(function()
    ns = kube.new_namespace("e2e-webhooks")
    kube.must { "label", "namespace", ns, LABEL .. "=" .. token }
    local p = assert(io.popen("mktemp -d"))
    certs = p:read("l")
    p:close()
    assert(proc.sh(("hack/certs.sh %s >/dev/null"):format(proc.quote(certs .. "/pair"))))
    ca = require("luaop.base64").encode(read(certs .. "/pair/ca.crt"))
    vol = volume.new(scripts())
    run = luaop.start({ vol.dir }, { flags = { "--webhook-bind-address", "127.0.0.1:0",
      "--webhook-cert-path", certs .. "/pair", "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0" } })
    port = tonumber(kube.wait_for("the webhook server's port in the log", 30, function()
      return run.stderr():match('Starting webhook server.-"port": (%d+)')
    end))
    hooks.crds = { at_crd(), machine_crd() }
    for _, c in ipairs(hooks.crds) do kube.apply(json.encode(c)) end
    hooks.validating = { apiVersion = "admissionregistration.k8s.io/v1", kind = "ValidatingWebhookConfiguration",
      metadata = { name = "e2e-validating-" .. token }, webhooks = {
        hook("/validate-" .. GROUP:gsub("%.", "-") .. "-v1alpha1-hookat", GROUP, "hookats", { "CREATE", "UPDATE" }),
        hook("/validate--v1-configmap", "", "configmaps", { "CREATE" }, "Fail",
          { matchLabels = { policy = "fail" } }),
        hook("/validate--v1-configmap", "", "configmaps", { "CREATE" }, "Ignore",
          { matchLabels = { policy = "ignore" } }),
      } }
    hooks.validating.webhooks[3].name = "ignore-" .. hooks.validating.webhooks[3].name
    hooks.mutating = { apiVersion = "admissionregistration.k8s.io/v1", kind = "MutatingWebhookConfiguration",
      metadata = { name = "e2e-mutating-" .. token }, webhooks = {
        hook("/mutate-" .. MGROUP:gsub("%.", "-") .. "-v1alpha1-hookmachine", MGROUP, "hookmachines", { "CREATE" }) } }
    kube.apply(json.encode(hooks.validating))
    kube.apply(json.encode(hooks.mutating))
    -- the CRDs served (and their conversion reaching luaop) before any spec writes
    kube.wait_for("the At CRD served in both versions", 60, function()
      return kube.kubectl { "get", "hookats.v1alpha2." .. GROUP, "-n", ns }
    end)
  end)

  teardown(function()
    if hooks.validating then kube.kubectl { "delete", "validatingwebhookconfiguration", hooks.validating.metadata.name } end
    if hooks.mutating then kube.kubectl { "delete", "mutatingwebhookconfiguration", hooks.mutating.metadata.name } end
    if ns then kube.delete_namespace(ns) end
    for _, c in ipairs(hooks.crds or {}) do kube.kubectl { "delete", "crd", c.metadata.name, "--wait=false" } end
    if run then
      run.stop()
      run.cleanup()
    end
    if vol then vol:remove() end
    if certs then os.execute("rm -rf " .. proc.quote(certs)) end
  end)

  local function at(name, schedule, command, version)
    return json.encode { apiVersion = GROUP .. "/" .. (version or "v1alpha1"), kind = AT,
      metadata = { name = name, namespace = ns, labels = { team = "e2e" }, annotations = { note = "kept" } },
      spec = version == "v1alpha2" and { runAt = schedule, command = command } or { schedule = schedule, command = command } }
  end

  local function soon(days) return os.date("!%Y-%m-%dT%H:%M:%SZ", os.time() + (days or 1) * 86400) end

  it("refuses an invalid At with the script's message, and admits a valid one", function()
    local ok, out = kube.create(at("bad", soon(), "rm -rf /"))
    assert.is_false(ok)
    assert.matches('spec.command: "rm" is not an allowed command', out, 1, true)
    ok, out = kube.create(at("far", soon(400), "date"))
    assert.is_false(ok)
    assert.matches("is more than a year ahead", out, 1, true)
    assert.is_true((kube.create(at("good", soon(), "echo hi"))))
  end)

  it("defaults a Machine's switches through the mutating webhook's JSON patch", function()
    kube.must({ "create", "-f", "-" }, json.encode { apiVersion = MGROUP .. "/v1alpha1", kind = MACHINE,
      metadata = { name = "m", namespace = ns } })
    assert.are.equal(1, kube.get("hookmachines." .. MGROUP, "m", ns).spec.switches)
  end)

  it("serves both versions of At: stored in v1alpha1, read and written in v1alpha2, a round trip lossless", function()
    kube.must({ "create", "-f", "-" }, at("one", soon(2), "echo one"))
    local v1 = kube.get("hookats.v1alpha1." .. GROUP, "one", ns)
    local v2 = kube.get("hookats.v1alpha2." .. GROUP, "one", ns)
    assert.are.equal(GROUP .. "/v1alpha2", v2.apiVersion)
    assert.are.same({ runAt = v1.spec.schedule, command = "echo one" }, v2.spec)
    -- written in v1alpha2 (a change to the command), read back in v1alpha1
    v2.spec.command = "echo two"
    kube.must({ "replace", "-f", "-" }, json.encode(v2))
    local back = kube.get("hookats.v1alpha1." .. GROUP, "one", ns)
    assert.are.same({ schedule = v1.spec.schedule, command = "echo two" }, back.spec)
    assert.are.same(v1.metadata.labels, back.metadata.labels)
    assert.are.same(v1.metadata.annotations, back.metadata.annotations)
    -- created in v1alpha2, read in v1alpha1
    local when = soon(3)
    kube.must({ "create", "-f", "-" }, at("two", when, "sleep 1", "v1alpha2"))
    assert.are.same({ schedule = when, command = "sleep 1" }, kube.get("hookats.v1alpha1." .. GROUP, "two", ns).spec)
  end)

  local function cm(name, policy, data)
    return json.encode { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = name, namespace = ns, labels = { policy = policy } }, data = data }
  end

  it("answers a handler that raises, breaks its budget or passes its deadline 500: failurePolicy Fail refuses "
    .. "with the error, Ignore admits", function()
    for i, case in ipairs { { { raise = "1" }, "asked to raise" }, { { spin = "1" }, "instruction budget" },
      { { sleep = "1" }, "did not finish within its deadline of 2 s" } } do
      local ok, out = kube.create(cm("fail-" .. i, "fail", case[1]))
      assert.is_false(ok, out)
      assert.matches(case[2], out, 1, true)
      assert.is_true((kube.create(cm("ignore-" .. i, "ignore", case[1]))))
    end
    local ok, out = kube.create(cm("denied", "fail", { deny = "x" }))
    assert.is_false(ok)
    assert.matches("denied: x", out, 1, true)
  end)

  -- The serial of the certificate a TLS client is served at 127.0.0.1:port,
  -- and of the one in a file, as openssl prints them (hex).
  local function served_serial()
    local ok, out = proc.sh(("openssl s_client -connect 127.0.0.1:%d -servername 127.0.0.1 </dev/null 2>/dev/null"
      .. " | openssl x509 -noout -serial"):format(port))
    return ok and out:match("serial=(%x+)")
  end
  local function file_serial(path)
    local ok, out = proc.sh("openssl x509 -noout -serial -in " .. proc.quote(path))
    return assert(ok and out:match("serial=(%x+)"), out)
  end

  it("serves a certificate rotated on disk as the kubelet rotates a Secret's, and no request fails meanwhile", function()
    local old = file_serial(certs .. "/pair/tls.crt")
    assert.are.equal(old, served_serial())
    -- admission requests flowing through the API server the whole time:
    -- server-side dry-run creates of a valid At, one after another, until
    -- the stop file appears; each prints ok or its error
    local dir = proc.tempdir()
    proc.write(dir, "at.json", at("flow", soon(), "echo flow"))
    local loop = ([[while [ ! -e %s/stop ]; do
      if %s --kubeconfig %s create --dry-run=server -f %s/at.json >/dev/null 2>%s/err; then echo ok;
      else echo "failed: $(cat %s/err)"; fi; done]]):format(dir, proc.quote(os.getenv("KUBECTL")),
      proc.quote(os.getenv("KUBECONFIG")), dir, dir, dir)
    local _, stop = proc.background("sh -c " .. proc.quote(loop), dir .. "/log", 120)
    local function answered()
      local n = 0
      for _ in (proc.read(dir .. "/log") or ""):gmatch("ok\n") do n = n + 1 end
      return n
    end
    kube.wait_for("requests flowing", 30, function() return answered() >= 5 end)
    assert(proc.sh(("hack/certs.sh --rotate %s >/dev/null"):format(proc.quote(certs .. "/pair"))))
    local new = file_serial(certs .. "/pair/tls.crt")
    assert.are_not.equal(old, new)
    kube.wait_for("the new certificate served", 30, function() return served_serial() == new end)
    local at_rotation = answered()
    kube.wait_for("requests after the rotation", 30, function() return answered() >= at_rotation + 5 end)
    proc.write(dir, "stop", "")
    stop()
    local log = proc.read(dir .. "/log")
    os.execute("rm -rf " .. proc.quote(dir))
    assert.is_nil(log:find("failed", 1, true), log)
  end)

  it("keeps the old handlers serving after a broken reload, and serves the new ones after a good one", function()
    local before = #run.stderr()
    vol:update(scripts("local luaop = require 'luaop'\nreturn luaop.webhook.validating { resource = 3 }\n"))
    kube.wait_for("the failed reload logged", 30, function()
      return run.stderr():sub(before):find("script reload failed", 1, true)
    end)
    local ok, out = kube.create(at("bad2", soon(), "rm x"))
    assert.is_false(ok)
    assert.matches('"rm" is not an allowed command', out, 1, true)
    before = #run.stderr()
    vol:update(scripts(at_script(read("operators/webhooks/at-webhooks.lua"))
      :gsub("date = true,", "date = true, rm = true,")))
    kube.wait_for("the reload logged", 30, function()
      return run.stderr():sub(before):find("script reloaded", 1, true)
    end)
    assert.is_true((kube.create(at("rm-ok", soon(), "rm x"))))
  end)
end)
