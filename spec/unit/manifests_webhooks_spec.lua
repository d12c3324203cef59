-- The webhook manifests (manifests/webhooks and its cert-manager and local
-- overlays) rendered with kubectl kustomize, offline, and checked object by
-- object; and hack/certs.sh, the CA bundle without cert-manager, run in a
-- directory of the spec's own and checked with openssl. The API server's
-- own verdict on the same manifests (a server dry-run) is
-- spec/e2e/manifests_webhooks_spec.lua's.
local proc = require "support.proc"
local m = require "support.manifests"

local AT_CRD = "ats.cnat.programming-kubernetes.info"
local MACHINE_CRD = "machines.useless.container.training"
local VWC = "luaop-validating-webhook-configuration"
local MWC = "luaop-mutating-webhook-configuration"
local SERVICE, NAMESPACE, SECRET = "luaop-webhook-service", "luaop-system", "luaop-webhook-server-cert"
local CERT_DIR = "/tmp/k8s-webhook-server/serving-certs" -- controller-runtime's CertDir

-- kubebuilder's path for a webhook of a group, version and kind
-- (controller-runtime's generateValidatePath/generateMutatePath).
local function kb_path(verb, group, version, kind)
  return "/" .. verb .. "-" .. group:gsub("%.", "-") .. "-" .. version .. "-" .. kind:lower()
end

local function version(crd, name)
  for _, v in ipairs(crd.spec.versions) do
    if v.name == name then return v end
  end
end

local function container(objs)
  local d = m.find(objs, "Deployment", "luaop")
  return d, d.spec.template.spec.containers[1]
end

-- The webhook of a configuration (each has exactly one).
local function webhook(objs, kind, name)
  local c = m.find(objs, kind, name)
  assert.are.equal(1, #c.webhooks)
  return c.webhooks[1]
end

local function lines_of(cmd)
  local ok, out = proc.sh(cmd)
  assert(ok, out)
  local list = {}
  for l in out:gmatch("[^\n]+") do list[#list + 1] = l end
  return list
end

describe("the webhook manifests", function()
  local plain, cm, loc
  setup(function()
    plain = m.render("manifests/webhooks")
    cm = m.render("manifests/webhooks/cert-manager")
    loc = m.render("manifests/webhooks/local")
  end)

  it("manifests/webhooks: a Service from 443 to the container's 9443, webhooks at kubebuilder's paths, no caBundle", function()
    local svc = m.find(plain, "Service", SERVICE)
    assert.are.equal(NAMESPACE, svc.metadata.namespace)
    assert.are.equal(1, #svc.spec.ports)
    local port = svc.spec.ports[1]
    assert.are.same({ 443, "webhook-server", "TCP" }, { port.port, port.targetPort, port.protocol })
    local d, c = container(plain)
    assert.are.same(d.spec.template.metadata.labels, svc.spec.selector) -- it selects luaop's Pods
    local named
    for _, p in ipairs(c.ports) do
      if p.name == port.targetPort then named = p end
    end
    assert.are.same({ name = "webhook-server", containerPort = 9443, protocol = "TCP" }, named)

    local at = m.find(plain, "CustomResourceDefinition", AT_CRD)
    local machine = m.find(plain, "CustomResourceDefinition", MACHINE_CRD)
    local cases = {
      { VWC, "ValidatingWebhookConfiguration", kb_path("validate", at.spec.group, "v1alpha1", at.spec.names.kind),
        at, { "CREATE", "UPDATE" } },
      { MWC, "MutatingWebhookConfiguration", kb_path("mutate", machine.spec.group, "v1alpha1", machine.spec.names.kind),
        machine, { "CREATE" } },
    }
    -- (the plan's paths, written out: what the scripts' definitions serve)
    assert.are.equal("/validate-cnat-programming-kubernetes-info-v1alpha1-at", cases[1][3])
    assert.are.equal("/mutate-useless-container-training-v1alpha1-machine", cases[2][3])
    for _, case in ipairs(cases) do
      local name, kind, path, crd, ops = table.unpack(case)
      local w = webhook(plain, kind, name)
      assert.are.same({ service = { name = SERVICE, namespace = NAMESPACE, path = path, port = 443 } }, w.clientConfig)
      assert.are.same({ "Fail", "None", { "v1" }, 10 },
        { w.failurePolicy, w.sideEffects, w.admissionReviewVersions, w.timeoutSeconds })
      assert.are.same({ { apiGroups = { crd.spec.group }, apiVersions = { "v1alpha1" }, operations = ops,
        resources = { crd.spec.names.plural }, scope = "Namespaced" } }, w.rules)
      assert.matches("^[a-z0-9-]+%.[a-z0-9.-]+%.[a-z]+$", w.name) -- fully qualified, as the API requires
    end
    -- not deployed by this overlay: the samples (refused until luaop's webhooks answer)
    assert.are.same({}, m.all(plain, "At"))
    assert.are.same({}, m.all(plain, "Machine"))
  end)

  it("At's CRD serves v1alpha1, the storage version, and v1alpha2 {runAt, command}, converted by the webhook at /convert", function()
    for _, objs in ipairs { plain, cm, loc } do
      local crd = m.find(objs, "CustomResourceDefinition", AT_CRD)
      assert.are.equal(2, #crd.spec.versions)
      local v1, v2 = version(crd, "v1alpha1"), version(crd, "v1alpha2")
      assert.are.same({ true, true, true, false }, { v1.served, v1.storage, v2.served, v2.storage })
      local s1 = v1.schema.openAPIV3Schema.properties
      local s2 = v2.schema.openAPIV3Schema.properties
      assert.are.same({ "runAt", "command" }, s2.spec.required)
      local names = {}
      for k in pairs(s2.spec.properties) do names[#names + 1] = k end
      table.sort(names)
      assert.are.same({ "command", "runAt" }, names)
      -- runAt is v1alpha1's schedule renamed (its description aside), command as it was
      local schedule, run_at = s1.spec.properties.schedule, s2.spec.properties.runAt
      assert.are.same({ schedule.type, schedule.format, schedule.pattern }, { run_at.type, run_at.format, run_at.pattern })
      assert.are.same(s1.spec.properties.command, s2.spec.properties.command)
      assert.are.same(s1.status, s2.status) -- the same status in both versions
      assert.are.same(v1.subresources, v2.subresources)
      local conv = crd.spec.conversion
      assert.are.equal("Webhook", conv.strategy)
      assert.are.same({ "v1" }, conv.webhook.conversionReviewVersions)
      local cc = conv.webhook.clientConfig
      if objs == loc then
        assert.are.same({ url = "https://127.0.0.1:9443/convert" }, cc)
      else
        assert.are.same({ service = { name = SERVICE, namespace = NAMESPACE, path = "/convert", port = 443 } }, cc)
      end
    end
    -- manifests/crds and manifests/ keep At as it was: one version, no conversion
    for _, dir in ipairs { "manifests/crds", "manifests" } do
      local crd = m.find(m.render(dir), "CustomResourceDefinition", AT_CRD)
      assert.are.equal(1, #crd.spec.versions, dir)
      assert.is_nil(crd.spec.conversion, dir)
    end
  end)

  it("mount the serving Secret at controller-runtime's cert dir, and the webhook scripts in the scripts' ConfigMap", function()
    local d, c = container(plain)
    local mount, volume
    for _, vm in ipairs(c.volumeMounts) do
      if vm.mountPath == CERT_DIR then mount = vm end
    end
    assert.is_truthy(mount, "a volume mounted at " .. CERT_DIR)
    assert.is_true(mount.readOnly)
    assert.is_nil(mount.subPath) -- a subPath never sees the Secret's updates
    for _, v in ipairs(d.spec.template.spec.volumes) do
      if v.name == mount.name then volume = v end
    end
    assert.are.same({ secretName = SECRET }, volume.secret)
    -- the operators' mount and arguments untouched
    local _, before = container(m.render("manifests"))
    assert.are.same(before.args, c.args)
    assert.are.equal(#before.volumeMounts + 1, #c.volumeMounts)

    -- one ConfigMap, its stable name, every operators/*.lua and operators/webhooks/*.lua as they are
    local cms = m.all(plain, "ConfigMap")
    assert.are.equal(1, #cms)
    assert.are.same({ "luaop-operators", NAMESPACE }, { cms[1].metadata.name, cms[1].metadata.namespace })
    local files = lines_of("cd operators && ls *.lua webhooks/*.lua")
    local keys = {}
    for k in pairs(cms[1].data) do keys[#keys + 1] = k end
    assert.are.equal(#files, #keys)
    for _, f in ipairs(files) do
      local key = f:match("[^/]+$")
      assert.are.equal(proc.read("operators/" .. f), cms[1].data[key], f .. " is not under files: in its kustomization")
    end
    -- the two webhook scripts among them, beside the operators (one flat directory in the Pod)
    assert.is_truthy(cms[1].data["at-webhooks.lua"])
    assert.is_truthy(cms[1].data["machine-webhooks.lua"])
  end)

  it("cert-manager overlay: a self-signed Issuer, a Certificate for the Service into the mounted Secret, inject-ca-from", function()
    local issuer = m.find(cm, "Issuer", "luaop-selfsigned-issuer")
    assert.are.same({ "cert-manager.io/v1", NAMESPACE }, { issuer.apiVersion, issuer.metadata.namespace })
    assert.are.same({ selfSigned = {} }, { selfSigned = issuer.spec.selfSigned })
    local cert = m.find(cm, "Certificate", "luaop-serving-cert")
    assert.are.same({ "cert-manager.io/v1", NAMESPACE }, { cert.apiVersion, cert.metadata.namespace })
    assert.are.same({ SERVICE .. "." .. NAMESPACE .. ".svc", SERVICE .. "." .. NAMESPACE .. ".svc.cluster.local" },
      cert.spec.dnsNames)
    assert.are.same({ kind = "Issuer", name = issuer.metadata.name }, cert.spec.issuerRef)
    -- the Secret the Deployment mounts
    local d = m.find(cm, "Deployment", "luaop")
    local secrets = {}
    for _, v in ipairs(d.spec.template.spec.volumes) do
      if v.secret then secrets[#secrets + 1] = v.secret.secretName end
    end
    assert.are.same({ cert.spec.secretName }, secrets)
    -- cainjector's annotation, naming that Certificate, on the three objects that take a caBundle
    local inject = NAMESPACE .. "/" .. cert.metadata.name
    for _, o in ipairs {
      m.find(cm, "ValidatingWebhookConfiguration", VWC), m.find(cm, "MutatingWebhookConfiguration", MWC),
      m.find(cm, "CustomResourceDefinition", AT_CRD),
    } do
      assert.are.equal(inject, o.metadata.annotations["cert-manager.io/inject-ca-from"], o.kind)
    end
    -- the CRDs no conversion concerns keep no annotation; neither overlay without cert-manager has one
    assert.is_nil(m.find(cm, "CustomResourceDefinition", MACHINE_CRD).metadata.annotations)
    for _, objs in ipairs { plain, loc } do
      for _, o in ipairs(objs) do
        assert.is_nil(o.metadata.annotations and o.metadata.annotations["cert-manager.io/inject-ca-from"])
      end
      assert.are.same({}, m.all(objs, "Certificate"))
    end
    -- otherwise the same objects as manifests/webhooks, and no caBundle (cainjector fills it)
    assert.are.equal(#plain + 2, #cm)
    assert.is_nil(webhook(cm, "ValidatingWebhookConfiguration", VWC).clientConfig.caBundle)
    assert.is_nil(webhook(cm, "MutatingWebhookConfiguration", MWC).clientConfig.caBundle)
  end)

  it("local overlay: the CRDs and both webhook configurations, at https://127.0.0.1:9443 and the same paths, nothing else", function()
    local kinds = {}
    for _, o in ipairs(loc) do kinds[#kinds + 1] = o.kind .. "/" .. o.metadata.name end
    table.sort(kinds)
    assert.are.same({ "CustomResourceDefinition/" .. AT_CRD, "CustomResourceDefinition/" .. MACHINE_CRD,
      "CustomResourceDefinition/switches.useless.container.training", "MutatingWebhookConfiguration/" .. MWC,
      "ValidatingWebhookConfiguration/" .. VWC }, kinds)
    for _, case in ipairs { { "ValidatingWebhookConfiguration", VWC }, { "MutatingWebhookConfiguration", MWC } } do
      local w, there = webhook(loc, case[1], case[2]), webhook(plain, case[1], case[2])
      assert.are.same({ url = "https://127.0.0.1:9443" .. there.clientConfig.service.path }, w.clientConfig)
      there.clientConfig = nil
      w.clientConfig = nil
      assert.are.same(there, w) -- the rest as in the cluster
    end
  end)
end)

describe("hack/certs.sh", function()
  local dir
  before_each(function() dir = proc.tempdir() end)
  after_each(function() proc.sh("rm -rf " .. proc.quote(dir)) end)

  local function serial(path)
    return m.openssl("x509 -noout -serial -in " .. proc.quote(path)):match("serial=(%x+)")
  end

  local function certs(args)
    local code, out, err = m.certs(args)
    assert.are.equal(0, code, err)
    return out, err
  end

  it("makes a CA and an ECDSA P-256 serving certificate that verifies against it, naming the Service, 127.0.0.1 and localhost", function()
    certs { dir }
    local crt, key, ca = dir .. "/tls.crt", dir .. "/tls.key", dir .. "/ca.crt"
    assert.matches(": OK", m.openssl(("verify -CAfile %s -purpose sslserver %s"):format(ca, crt)))
    local text = m.openssl("x509 -noout -text -in " .. crt)
    assert.matches("DNS:luaop%-webhook%-service%.luaop%-system%.svc, DNS:luaop%-webhook%-service%.luaop%-system%.svc%.cluster%.local, "
      .. "DNS:localhost, IP Address:127%.0%.0%.1\n", text)
    assert.matches("ASN1 OID: prime256v1", text)
    assert.matches("CA:FALSE", text)
    assert.matches("TLS Web Server Authentication", text)
    -- the key is the certificate's, readable by its owner alone
    assert.are.equal(m.openssl("x509 -noout -pubkey -in " .. crt), m.openssl("pkey -pubout -in " .. key))
    assert.are.equal("600", select(2, proc.sh("stat -L -c %a " .. key)):match("%d+"))
    -- the CA's key is not beside the pair (nor in the Secret made from it)
    assert.are.same({ "ca", "ca.crt", "tls.crt", "tls.key" }, lines_of("ls " .. dir))
    assert.matches("CA:TRUE", m.openssl("x509 -noout -text -in " .. dir .. "/ca/ca.crt"))
    assert.are.equal(proc.read(dir .. "/ca/ca.crt"), proc.read(ca))
    -- another Service: its names
    local other = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. proc.quote(other)) end)
    certs { "--service", "hooks", "--namespace", "ops", other }
    assert.matches("DNS:hooks%.ops%.svc, DNS:hooks%.ops%.svc%.cluster%.local,",
      m.openssl("x509 -noout -ext subjectAltName -in " .. other .. "/tls.crt"))
  end)

  it("is idempotent: run again, it keeps the certificate and its files; for other names it issues one from the same CA", function()
    certs { dir }
    local before = { serial(dir .. "/tls.crt"), select(2, proc.sh("stat -L -c '%i %Y' " .. dir .. "/tls.crt " .. dir .. "/tls.key")),
      proc.read(dir .. "/ca.crt") }
    local _, err = certs { dir }
    assert.matches("is good %(serial " .. before[1] .. "%); kept", err)
    assert.are.same(before, { serial(dir .. "/tls.crt"),
      select(2, proc.sh("stat -L -c '%i %Y' " .. dir .. "/tls.crt " .. dir .. "/tls.key")), proc.read(dir .. "/ca.crt") })
    -- a certificate that does not name the Service asked for is replaced, the CA kept
    certs { "--namespace", "elsewhere", dir }
    assert.are_not.equal(before[1], serial(dir .. "/tls.crt"))
    assert.are.equal(before[3], proc.read(dir .. "/ca.crt"))
    assert.matches("DNS:luaop%-webhook%-service%.elsewhere%.svc,", m.openssl("x509 -noout -ext subjectAltName -in " .. dir .. "/tls.crt"))
  end)

  it("--rotate issues a new serial from the same CA, swapping the pair in one rename of ..data as the kubelet does", function()
    certs { dir }
    local first, ca = serial(dir .. "/tls.crt"), proc.read(dir .. "/ca.crt")
    local data = select(2, proc.sh("readlink " .. dir .. "/..data"))
    local _, err = certs { "--rotate", dir }
    local second = serial(dir .. "/tls.crt")
    assert.are_not.equal(first, second)
    assert.matches("issued a serving certificate, serial " .. second, err)
    assert.are.equal(ca, proc.read(dir .. "/ca.crt"))
    assert.matches(": OK", m.openssl(("verify -CAfile %s/ca.crt -purpose sslserver %s/tls.crt"):format(dir, dir)))
    assert.are.equal(m.openssl("x509 -noout -pubkey -in " .. dir .. "/tls.crt"), m.openssl("pkey -pubout -in " .. dir .. "/tls.key"))
    -- the files are links through ..data, which now names a new directory; the old one is gone
    for _, f in ipairs { "tls.crt", "tls.key", "ca.crt" } do
      assert.are.equal("..data/" .. f .. "\n", select(2, proc.sh("readlink " .. dir .. "/" .. f)))
    end
    local now = select(2, proc.sh("readlink " .. dir .. "/..data"))
    assert.are_not.equal(data, now)
    local dots = lines_of("cd " .. dir .. " && ls -d ..?*")
    table.sort(dots)
    assert.are.same({ now:match("[^\n]+"), "..data" }, dots)
    -- and again: a third serial
    certs { "--rotate", dir }
    assert.is_true(serial(dir .. "/tls.crt") ~= second and serial(dir .. "/tls.crt") ~= first)
  end)

  it("--rotate needs the CA it rotates from; an unknown option is refused", function()
    certs { dir }
    proc.sh("rm " .. dir .. "/ca/ca.key")
    local code, _, err = m.certs { "--rotate", dir }
    assert.are.equal(1, code)
    assert.matches("%-%-rotate: .* has no CA", err)
    code, _, err = m.certs { "--frobnicate", dir }
    assert.are.equal(1, code)
    assert.matches("unknown option %-%-frobnicate", err)
  end)

  it("prints the Secret and the caBundle patches, which set the CA in both webhook configurations and the conversion webhook", function()
    local out = certs { dir }
    local bundle = select(2, proc.sh("base64 -w0 " .. dir .. "/ca.crt"))
    assert.are.equal(bundle .. "\n", (certs { "--ca-bundle", dir }))
    -- the Secret: the one the Deployment mounts, from the pair's files
    assert.matches("kubectl %-n luaop%-system create secret generic luaop%-webhook%-server%-cert %-%-type=kubernetes%.io/tls "
      .. "%-%-from%-file=tls%.crt=" .. dir:gsub("%p", "%%%0") .. "/tls%.crt", out)
    assert.matches("apply %-%-server%-side", out) -- (no copy of the key in a last-applied annotation)
    for _, case in ipairs { { "manifests/webhooks", out }, { "manifests/webhooks/local", (certs { "--local", dir }) } } do
      local overlay, printed = case[1], case[2]
      local patches = m.patches(printed)
      assert.are.equal(3, #patches, printed)
      local k = proc.tempdir()
      finally(function() proc.sh("rm -rf " .. proc.quote(k)) end)
      local objs = m.render(m.patched(k, overlay, patches))
      local got = {
        webhook(objs, "ValidatingWebhookConfiguration", VWC).clientConfig.caBundle,
        webhook(objs, "MutatingWebhookConfiguration", MWC).clientConfig.caBundle,
        m.find(objs, "CustomResourceDefinition", AT_CRD).spec.conversion.webhook.clientConfig.caBundle,
      }
      assert.are.same({ bundle, bundle, bundle }, got, overlay)
      assert.is_nil(m.find(objs, "CustomResourceDefinition", MACHINE_CRD).spec.conversion)
      -- (the --local lines make no Secret)
      assert.are.equal(overlay == "manifests/webhooks", printed:find("create secret", 1, true) ~= nil)
    end
    -- the bundle is the CA: it decodes to ca.crt
    local f = proc.write(dir, "bundle.b64", bundle)
    assert.are.equal(proc.read(dir .. "/ca.crt"), select(2, proc.sh("base64 -d " .. f)))
  end)
end)
