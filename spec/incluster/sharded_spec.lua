-- luaop sharded as a cluster runs it: manifests/sharded (through a test
-- overlay: spec/incluster/sharded, the real node's toleration and the
-- imported image), as docs/sharding.md says to deploy it. Three Pods on the
-- real node, each a member of the ring "luaop" with a Lease of its own in
-- luaop-system (the manifests' Role on Leases), dividing the hash space;
-- the samples the manifests carry converge. Runs after incluster_spec.lua,
-- which builds and imports the image (done again here when it runs alone:
-- cached by its sources' hash).
local kube = require "support.kube"
local incluster = require "support.incluster"
local ranges = require "luaop.shard.ranges"

local ns = "luaop-system"

describe("luaop sharded in a cluster", function()
  setup(function()
    incluster.prepare("sharded")
    kube.must { "apply", "-k", "manifests/crds" }
    kube.must { "wait", "--for=condition=Established", "--timeout=60s", "-f", "manifests/crds/at.yaml",
      "-f", "manifests/crds/machine.yaml" }
    kube.must { "apply", "-k", "spec/incluster/sharded" }
  end)

  teardown(function()
    -- the samples first, while the operators run (the secret copier's
    -- finalizer on the source Secret needs it), then the rest
    kube.kubectl { "delete", "at", "--all", "-n", "default", "--timeout=60s" }
    kube.kubectl { "delete", "-k", "manifests/samples", "--ignore-not-found", "--timeout=60s" }
    kube.kubectl { "delete", "-k", "spec/incluster/sharded", "--wait=false", "--ignore-not-found" }
  end)

  it("runs three Pods as members of the ring luaop, their Leases dividing the hash space once, and the samples "
    .. "converge", function()
    kube.wait_for("three Ready luaop Pods on the real node", 180, function()
      local n = 0
      for _, p in ipairs(kube.list("pods", ns, "-l", "app.kubernetes.io/name=luaop")) do
        for _, c in ipairs(type(p.status.conditions) == "table" and p.status.conditions or {}) do
          if c.type == "Ready" and c.status == "True" and p.spec.nodeName == "luaop-node" then n = n + 1 end
        end
      end
      return n == 3
    end)
    -- each Pod's Lease in the ring, held, with its ranges: together the
    -- whole space, none twice
    local leases = kube.wait_for("three Leases of the ring luaop dividing the space", 60, function()
      local got, all, total = {}, {}, 0
      for _, l in ipairs(kube.list("leases", ns, "-l", "luaop.dev/shard-ring=luaop")) do
        local held = l.metadata.annotations and l.metadata.annotations["luaop.dev/shard-ranges"]
        if l.spec.holderIdentity and l.spec.holderIdentity ~= "" and held then
          local set = ranges.decode(held)
          if not set or #ranges.intersect(all, set) > 0 then return false end
          all = ranges.union(all, set)
          total = total + 1
          got[#got + 1] = l
        end
      end
      return total == 3 and ranges.equal(all, ranges.ALL) and got
    end)
    -- the holders are the Pods (the downward API's name in the identity)
    local pods = {}
    for _, p in ipairs(kube.list("pods", ns, "-l", "app.kubernetes.io/name=luaop")) do pods[p.metadata.name] = true end
    for _, l in ipairs(leases) do
      local owner = false
      for name in pairs(pods) do
        if l.spec.holderIdentity:find(name, 1, true) then owner = true end
      end
      assert.is_true(owner, l.spec.holderIdentity .. " is none of the Pods")
    end
    -- the samples the manifests carry, each reconciled by whichever holds it
    kube.wait_for("machine-1 converged: three switches, all down", 90, function()
      local m = kube.get("machine", "machine-1", "default")
      local sw = kube.list("switches", "default", "-l", "machine=machine-1")
      return m and #sw == 3 and m.status and m.status.positions == "ddd"
    end)
    kube.wait_for("example-at DONE", 90, function()
      local at = kube.get("at", "example-at", "default")
      return at and at.status and at.status.phase == "DONE"
    end)
  end)
end)
