-- A controller of a cluster-scoped kind owning namespaced objects, on the
-- local control plane (issue 32, item 8): a Namespace labelled team gets a
-- ResourceQuota team-quota, controlled by the Namespace. The quota's
-- events enqueue the Namespace by its name alone, the key its own events
-- have: a deleted quota is made again, and the Namespace is reconciled
-- under one key, never "ns/ns" (which no cache answers, and which would
-- let two reconciles of one Namespace run at once).
local kube = require "support.kube"
local luaop = require "support.luaop"
local proc = require "support.proc"

describe("an owner of cluster scope", function()
  local run, ns
  -- this run's Namespaces carry this label: the controller sees no others
  local mark = ("%d-%04d"):format(os.time(), math.random(0, 9999))

  setup(function()
    run = luaop.start(([[
      local luaop = require "luaop"
      return luaop.controller {
        name = "team-quotas", resource = "v1/Namespace", label_selector = "e2e-owners=%s",
        owns = { "v1/ResourceQuota" }, concurrency = 2,
        reconcile = function(ctx, req)
          ctx.log:info("reconciled", { key = (req.namespace or "") .. "/" .. req.name })
          local ns = ctx:get("Namespace", req)
          if not ns or not (ns.metadata.labels or {}).team or ns.metadata.deletionTimestamp then return end
          if not ctx:get("ResourceQuota", "team-quota", ns.metadata.name) then
            assert(ctx:create(luaop.set_controller({ apiVersion = "v1", kind = "ResourceQuota",
              metadata = { name = "team-quota", namespace = ns.metadata.name },
              spec = { hard = { pods = "10" } } }, ns)))
          end
        end,
      }
    ]]):format(mark), { script = true })
  end)

  teardown(function()
    if run then run.cleanup() end
    if ns then kube.delete_namespace(ns) end
  end)

  -- The keys luaop reconciled that name `name`, each once, sorted.
  local function keys_of(name)
    local seen, out = {}, {}
    for line in run.stderr():gmatch("[^\n]+") do
      local key = line:find("\treconciled\t", 1, true) and line:match('"key": "([^"]*)"')
      if key and key:match("[^/]*$") == name and not seen[key] then
        seen[key] = true
        out[#out + 1] = key
      end
    end
    table.sort(out)
    return out
  end

  it("makes again the deleted ResourceQuota its Namespace controls, reconciling the Namespace under its name alone",
    function()
      ns = ("e2e-owners-%s"):format(mark)
      kube.apply(kube.json.encode { apiVersion = "v1", kind = "Namespace",
        metadata = { name = ns, labels = { team = "a", ["e2e-owners"] = mark } } })
      local function quota() return kube.get("resourcequota", "team-quota", ns) end
      local first = kube.wait_for("team-quota in " .. ns, 30, quota)
      local owner = kube.get("namespace", ns)
      local ref = first.metadata.ownerReferences[1]
      assert.are.same({ "v1", "Namespace", ns, owner.metadata.uid, true },
        { ref.apiVersion, ref.kind, ref.name, ref.uid, ref.controller })
      kube.must { "delete", "resourcequota", "team-quota", "-n", ns }
      local ok, err = pcall(kube.wait_for, "team-quota made again in " .. ns, 30, function()
        local q = quota()
        return q and q.metadata.uid ~= first.metadata.uid and q
      end)
      assert(ok, tostring(err) .. "\nluaop's last lines:\n" .. proc.tail(run.stderr(), 40))
      -- the Namespace's reconciles: its own events' and its quota's, one key
      assert.are.same({ "/" .. ns }, keys_of(ns), "luaop's last lines:\n" .. proc.tail(run.stderr(), 40))
      assert.is_nil(run.stderr():find("Reconciler error", 1, true), proc.tail(run.stderr(), 40))
    end)
end)
