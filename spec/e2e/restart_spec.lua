-- A controller across a kube-apiserver restart: its watch fails, luaop logs
-- that and keeps running, and once the API server is back its cache and its
-- reconciles catch up with every change, including those made just before
-- the API server went down and right after it came back.
local kube = require "support.kube"
local luaop = require "support.luaop"

describe("luaop", function()
  local ns

  setup(function()
    ns = kube.new_namespace("e2e-restart")
  end)

  teardown(function()
    if ns then kube.delete_namespace(ns) end
  end)

  -- ConfigMaps labelled app=restart, given as {name = v}; applied in one
  -- kubectl call.
  local function apply(cms)
    local docs = {}
    for name, v in pairs(cms) do
      docs[#docs + 1] = ([[
apiVersion: v1
kind: ConfigMap
metadata: {name: %s, namespace: %s, labels: {app: restart}}
data: {v: "%s"}
]]):format(name, ns, v)
    end
    kube.apply(table.concat(docs, "---\n"))
  end

  local function delete(name)
    kube.must { "delete", "configmap", name, "-n", ns, "--wait=false" }
  end

  -- What the controller printed: the last state each name was reconciled in,
  -- and the cache as the last reconcile saw it.
  local function seen(run)
    local last, cache = {}, nil
    for name, state, c in run.stdout():gmatch("reconciled (%S+) (%S+) cache (%S*)\n") do
      last[name], cache = state, c
    end
    return last, cache
  end

  -- Wait until the last reconcile of each name saw `want` ({name = v | "gone"})
  -- and the cache held exactly the names that are not gone.
  local function converged(run, what, want)
    local expect = {}
    for name, v in pairs(want) do
      if v ~= "gone" then expect[#expect + 1] = name .. "=" .. v end
    end
    table.sort(expect)
    expect = table.concat(expect, ",")
    kube.wait_for(what, 60, function()
      local last, cache = seen(run)
      for name, v in pairs(want) do
        if last[name] ~= v then return false end
      end
      return cache == expect
    end)
  end

  it("the watch survives a kube-apiserver restart and converges", function()
    apply { a = "1", b = "1", c = "1" }
    local run = luaop.start(([[
      local luaop = require "luaop"
      local ns = %q
      local function state(o) return o and (o.data and o.data.v or "-") or "gone" end
      -- no label_selector: ctx:get and ctx:list read the cache only when it
      -- holds the whole kind (here: the namespace, with its kube-root-ca.crt)
      return luaop.controller {
        name = "restart",
        resource = "v1/ConfigMap",
        namespace = ns,
        reconcile = function(ctx, req)
          local names = {}
          for _, o in ipairs(ctx:list("ConfigMap", { namespace = ns, labels = { app = "restart" } })) do
            names[#names + 1] = o.metadata.name .. "=" .. state(o)
          end
          table.sort(names)
          print(("reconciled %%s %%s cache %%s"):format(req.name, state(ctx:get("ConfigMap", req)),
            table.concat(names, ",")))
          io.stdout:flush()
        end,
      }
    ]]):format(ns))
    local stopped = false
    finally(function()
      if not stopped then run.stop() end
      run.cleanup()
    end)
    converged(run, "the first reconciles", { a = "1", b = "1", c = "1" })

    -- just before the API server goes: whether these reach the watch before
    -- it breaks is a race either way
    apply { a = "2", d = "1" }
    delete "b"
    local p = assert(io.popen("env -u LD_PRELOAD hack/cluster.sh restart-apiserver 2>&1"))
    local out = p:read("a")
    assert(p:close(), "hack/cluster.sh restart-apiserver failed:\n" .. out)

    -- right after it is back (restart-apiserver returns once the controllers
    -- work again; luaop may or may not be watching by then, as its backoff goes)
    apply { c = "2", d = "2", e = "1" }
    delete "a"
    converged(run, "the reconciles after the restart",
      { a = "gone", b = "gone", c = "2", d = "2", e = "1" })

    local err = run.stderr()
    -- (a reset watches again from where it was; a refused LIST lists again)
    assert.matches("ERROR\tinformer\tlist/watch failed, %a+ again", err)
    assert.is_false(run.exited(), "luaop exited:\n" .. err)
    -- still watching: a change now comes through too
    apply { e = "2" }
    converged(run, "a change after the restart", { a = "gone", b = "gone", c = "2", d = "2", e = "2" })
    stopped = true
    assert.are.equal(0, run.stop(), run.stderr())
  end)
end)
