-- luaop's webhooks as a cluster runs them: manifests/webhooks (through a
-- test overlay: spec/incluster/webhooks, the real node's toleration and the
-- imported image) with hack/certs.sh's Secret and caBundle, as
-- docs/webhooks.md says to deploy them. The API server, on the machine,
-- calls luaop-webhook-service's ClusterIP; the machine routes the Services'
-- range to the node (hack/node.sh), where kube-proxy's rules hand it to a
-- luaop Pod. Runs after incluster_spec.lua, which builds and imports the
-- image (done again here when it runs alone: cached by its sources' hash).
local kube = require "support.kube"
local proc = require "support.proc"
local incluster = require "support.incluster"

local sh, q = proc.sh, proc.quote
local ns = "luaop-system"

local function must(cmd, deadline)
  local ok, out = sh(cmd, deadline)
  if not ok then error(cmd .. " failed:\n" .. out, 2) end
  return out
end

-- hack/certs.sh's kubectl lines run with this cluster's kubectl and kubeconfig
local function certs(args)
  local bin = os.getenv("KUBECTL"):match("^(.*)/[^/]*$")
  return must(("hack/certs.sh %s | PATH=%s:$PATH KUBECONFIG=%s sh"):format(args, q(bin), q(os.getenv("KUBECONFIG"))))
end

local function soon(days) return os.date("!%Y-%m-%dT%H:%M:%SZ", os.time() + (days or 1) * 86400) end

describe("luaop's webhooks in a cluster", function()
  local dir

  setup(function()
    incluster.prepare("webhooks")
    dir = proc.tempdir()
    must("hack/certs.sh " .. q(dir .. "/pair") .. " >/dev/null")
    -- as docs/webhooks.md deploys them: the CRDs, the overlay, then the
    -- Secret and the caBundle
    kube.must { "apply", "-k", "manifests/crds" }
    kube.must { "wait", "--for=condition=Established", "--timeout=60s", "-f", "manifests/crds/at.yaml",
      "-f", "manifests/crds/machine.yaml" }
    kube.must { "apply", "-k", "spec/incluster/webhooks" }
    certs(q(dir .. "/pair"))
  end)

  teardown(function()
    kube.kubectl { "delete", "at", "--all", "-n", "default", "--timeout=60s" }
    kube.kubectl { "delete", "machine", "--all", "-n", "default", "--timeout=60s" }
    -- (the CRDs go too, as incluster_spec.lua's teardown takes them)
    kube.kubectl { "delete", "-k", "spec/incluster/webhooks", "--wait=false", "--ignore-not-found" }
    if dir then os.execute("rm -rf " .. q(dir)) end
  end)

  it("is called by the API server through its Service on the real node's Pods: an invalid At refused with the "
    .. "script's message, a Machine defaulted, At in both versions", function()
    kube.wait_for("two Ready luaop Pods serving webhooks", 180, function()
      local n = 0
      for _, slice in ipairs(kube.list("endpointslices.discovery.k8s.io", ns, "-l",
        "kubernetes.io/service-name=luaop-webhook-service")) do
        -- (endpoints and conditions may be JSON nulls)
        for _, e in ipairs(type(slice.endpoints) == "table" and slice.endpoints or {}) do
          if type(e.conditions) == "table" and e.conditions.ready == true then n = n + 1 end
        end
      end
      return n == 2
    end)
    -- refused by at-webhooks.lua, in the Pod, with its message
    local bad = ([[{"apiVersion": "cnat.programming-kubernetes.info/v1alpha1", "kind": "At",
      "metadata": {"name": "in-cluster-bad", "namespace": "default"},
      "spec": {"schedule": "%s", "command": "rm -rf /"}}]]):format(soon())
    local ok, out = kube.create(bad)
    assert.is_false(ok, out)
    assert.matches('admission webhook "[^"]+" denied the request: spec.command: "rm" is not an allowed command', out)
    -- a Machine without switches, defaulted by machine-webhooks.lua's patch
    kube.must({ "create", "-f", "-" }, [[{"apiVersion": "useless.container.training/v1alpha1", "kind": "Machine",
      "metadata": {"name": "in-cluster-defaulted", "namespace": "default"}, "spec": {}}]])
    assert.are.equal(1, kube.get("machines", "in-cluster-defaulted", "default").spec.switches)
    -- an At created in v1alpha2, stored in v1alpha1: /convert both ways
    local when = soon(2)
    kube.must({ "create", "-f", "-" }, ([[{"apiVersion": "cnat.programming-kubernetes.info/v1alpha2", "kind": "At",
      "metadata": {"name": "in-cluster-v2", "namespace": "default"}, "spec": {"runAt": "%s", "command": "echo v2"}}]])
      :format(when))
    assert.are.same({ schedule = when, command = "echo v2" },
      kube.get("ats.v1alpha1.cnat.programming-kubernetes.info", "in-cluster-v2", "default").spec)
    assert.are.same({ runAt = when, command = "echo v2" },
      kube.get("ats.v1alpha2.cnat.programming-kubernetes.info", "in-cluster-v2", "default").spec)
  end)
end)
