-- The webhook manifests (manifests/webhooks, its cert-manager and local
-- overlays, and the caBundle hack/certs.sh fills) before the API server, in
-- server dry-runs only: the API server validates them as it would store
-- them, and stores nothing. (A real At CRD with a conversion webhook that no
-- luaop serves would break every other spec's Ats on the shared control
-- plane.) Each object sent carries a label of this run's, which the live
-- objects must not have afterwards. What the objects say is
-- spec/unit/manifests_webhooks_spec.lua's.
local kube = require "support.kube"
local proc = require "support.proc"
local m = require "support.manifests"
local json = require("luaop.core").json

local AT_CRD = "ats.cnat.programming-kubernetes.info"
local MARK = "luaop.dev/manifests-dry-run"
local token = ("%d-%04d"):format(os.time(), math.random(0, 9999))

-- The objects of objs of the kinds named (a set), each labelled with this
-- run's token.
local function pick(objs, kinds)
  local list = {}
  for _, o in ipairs(objs) do
    if kinds[o.kind] then
      o.metadata.labels = o.metadata.labels or {}
      o.metadata.labels[MARK] = token
      list[#list + 1] = o
    end
  end
  return list
end

local ADMISSION = { CustomResourceDefinition = true, ValidatingWebhookConfiguration = true,
  MutatingWebhookConfiguration = true }

-- kubectl apply --dry-run=server of objs; ok, and the objects the API
-- server answered with (by kind/name), or its error. server_only: without
-- kubectl's own validation first (--validate=false), so that what refuses
-- is the API server.
local function dry_run(objs, server_only)
  local ok, out = kube.kubectl({ "apply", "--dry-run=server", "-o", "json", "-f", "-",
    server_only and "--validate=false" or "--validate=strict" },
    json.encode { apiVersion = "v1", kind = "List", items = objs })
  if not ok then return false, out end
  local got = json.decode(out)
  local by = {}
  for _, o in ipairs(got.items or { got }) do by[o.kind .. "/" .. o.metadata.name] = o end
  return true, by
end

-- No live object of objs carries this run's label: the dry-runs stored nothing.
local function nothing_stored(objs)
  for _, o in ipairs(objs) do
    local live = kube.get(o.kind, o.metadata.name, o.metadata.namespace)
    assert.is_falsy(live and live.metadata.labels and live.metadata.labels[MARK] == token,
      o.kind .. " " .. o.metadata.name .. " was stored by a dry run")
  end
end

describe("the webhook manifests on the API server (server dry-run)", function()
  it("accepts At's CRD with v1alpha2 and its conversion webhook, and both webhook configurations, of each overlay", function()
    for _, overlay in ipairs { "manifests/webhooks", "manifests/webhooks/cert-manager", "manifests/webhooks/local" } do
      local objs = pick(m.render(overlay), ADMISSION)
      assert.are.equal(5, #objs) -- three CRDs, two webhook configurations
      local ok, by = dry_run(objs)
      assert(ok, overlay .. ": " .. tostring(by))
      -- as the API server would store them: both versions, the conversion
      -- stanza and the webhooks' paths kept (none pruned or refused)
      local crd = by["CustomResourceDefinition/" .. AT_CRD]
      local names = {}
      for _, v in ipairs(crd.spec.versions) do names[#names + 1] = v.name .. (v.storage and "*" or "") end
      assert.are.same({ "v1alpha1*", "v1alpha2" }, names)
      local cc = crd.spec.conversion.webhook.clientConfig
      assert.are.equal("Webhook", crd.spec.conversion.strategy)
      assert.are.equal("/convert", cc.service and cc.service.path or cc.url:match("^https://127%.0%.0%.1:9443(/.*)"))
      local vwc = by["ValidatingWebhookConfiguration/luaop-validating-webhook-configuration"]
      local mwc = by["MutatingWebhookConfiguration/luaop-mutating-webhook-configuration"]
      for _, w in ipairs { vwc.webhooks[1], mwc.webhooks[1] } do
        assert.matches("^/[vm][a-z]+%-[a-z-]+%-v1alpha1%-[a-z]+$", w.clientConfig.service and w.clientConfig.service.path
          or w.clientConfig.url:match("^https://127%.0%.0%.1:9443(/.*)"))
      end
      if overlay:find("cert%-manager") then
        assert.are.equal("luaop-system/luaop-serving-cert", crd.metadata.annotations["cert-manager.io/inject-ca-from"])
      end
      nothing_stored(objs)
    end
  end)

  it("refuses what it cannot take: a conversion webhook without review versions, a webhook without sideEffects", function()
    local objs = pick(m.render("manifests/webhooks"), ADMISSION)
    local at
    for _, o in ipairs(objs) do
      if o.metadata.name == AT_CRD then at = o end
    end
    at.spec.conversion.webhook.conversionReviewVersions = nil
    local ok, out = dry_run(objs, true)
    assert.is_false(ok)
    assert.matches("spec%.conversion%.conversionReviewVersions: Required value", out)
    at.spec.conversion.webhook.conversionReviewVersions = json.array { "v1" }
    for _, o in ipairs(objs) do
      if o.kind == "ValidatingWebhookConfiguration" then o.webhooks[1].sideEffects = nil end
    end
    ok, out = dry_run(objs, true)
    assert.is_false(ok)
    assert.matches("webhooks%[0%]%.sideEffects: Required value", out)
    nothing_stored(objs)
  end)

  it("accepts the caBundle hack/certs.sh sets, in the cluster's overlay and the local one", function()
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. proc.quote(dir)) end)
    local code, _, err = m.certs { dir .. "/certs" }
    assert.are.equal(0, code, err)
    local bundle = select(2, proc.sh("base64 -w0 " .. dir .. "/certs/ca.crt"))
    for i, case in ipairs { { "manifests/webhooks" }, { "manifests/webhooks/local", "--local" } } do
      local out
      local args = { dir .. "/certs" }
      if case[2] then table.insert(args, 1, case[2]) end
      code, out, err = m.certs(args)
      assert.are.equal(0, code, err)
      local k = dir .. "/k" .. i
      proc.sh("mkdir " .. k)
      local objs = pick(m.render(m.patched(k, case[1], m.patches(out))), ADMISSION)
      local ok, by = dry_run(objs)
      assert(ok, case[1] .. ": " .. tostring(by))
      assert.are.equal(bundle, by["CustomResourceDefinition/" .. AT_CRD].spec.conversion.webhook.clientConfig.caBundle)
      assert.are.equal(bundle, by["ValidatingWebhookConfiguration/luaop-validating-webhook-configuration"]
        .webhooks[1].clientConfig.caBundle)
      assert.are.equal(bundle, by["MutatingWebhookConfiguration/luaop-mutating-webhook-configuration"]
        .webhooks[1].clientConfig.caBundle)
      nothing_stored(objs)
    end
  end)

  it("accepts manifests/webhooks' Deployment, Services, ConfigMap and RBAC, moved to a namespace of the spec's own", function()
    local ns = kube.new_namespace("manifests-webhooks")
    finally(function() kube.delete_namespace(ns) end)
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. proc.quote(dir)) end)
    local objs = m.render(m.patched(dir, "manifests/webhooks", {}, { "namespace: " .. ns }))
    local rest = {}
    for _, o in ipairs(objs) do
      if not ADMISSION[o.kind] and o.kind ~= "Namespace" then rest[#rest + 1] = o end
    end
    rest = pick(rest, setmetatable({}, { __index = function() return true end }))
    local ok, by = dry_run(rest)
    assert(ok, tostring(by))
    local d = by["Deployment/luaop"]
    assert.are.equal(ns, d.metadata.namespace)
    local c = d.spec.template.spec.containers[1]
    assert.are.equal(9443, c.ports[1].containerPort)
    assert.are.equal("luaop-webhook-server-cert", d.spec.template.spec.volumes[1].secret.secretName)
    assert.are.equal(443, by["Service/luaop-webhook-service"].spec.ports[1].port)
    nothing_stored(rest)
  end)
end)
