-- The typed client against the local control plane, through `luaop --script`.
-- Each program asserts as it goes; a failed assert fails the run with its
-- traceback.
local kube = require "support.kube"
local luaop = require "support.luaop"

describe("luaop --script and the client", function()
  local ns

  setup(function()
    ns = kube.new_namespace("e2e-client")
  end)

  teardown(function()
    if ns then kube.delete_namespace(ns) end
  end)

  it("runs a program top to bottom and exits with what it returns", function()
    local code, out = luaop.run([[
      local luaop = require "luaop"
      print("args", ...)
      print("ns", luaop.client().namespace)
      return 3
    ]], { args = { "a", "b" }, flags = { "--namespace", ns } })
    assert.are.equal(3, code)
    assert.matches("args\ta\tb", out)
    assert.is_truthy(out:find("ns\t" .. ns .. "\n", 1, true), out)
  end)

  it("fails with the script's traceback, naming file and line", function()
    local code, _, err = luaop.run("local x = nil\nlocal y = x.field\n")
    assert.are.equal(1, code)
    assert.matches("program failed", err)
    assert.matches("%.lua:2: attempt to index a nil value", err)
    assert.matches("stack traceback", err)
    code, _, err = luaop.run("this is not lua\n")
    assert.are.equal(1, code)
    assert.matches("cannot load program", err)
    assert.matches("%.lua:1:", err)
  end)

  it("creates, gets, updates, lists and deletes core objects", function()
    luaop.ok(([[
      local luaop = require "luaop"
      local c = luaop.client()
      local ns = %q
      local cm = assert(c:create { apiVersion = "v1", kind = "ConfigMap",
        metadata = { name = "one", namespace = ns, labels = { app = "crud" } }, data = { k = "v1" } })
      assert(cm.metadata.uid and cm.metadata.resourceVersion)

      local got = assert(c:get("ConfigMap", "one", ns))
      assert(got.data.k == "v1")
      got = assert(c:get("v1/ConfigMap", { namespace = ns, name = "one" }))

      got.data.k = "v2"
      local updated = assert(c:update(got))
      assert(updated.data.k == "v2")
      assert(updated.metadata.resourceVersion ~= cm.metadata.resourceVersion)

      assert(c:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "two", namespace = ns } })
      local list = assert(c:list("ConfigMap", { namespace = ns, label_selector = "app=crud" }))
      assert(#list.items == 1 and list.items[1].metadata.name == "one", "label selector")
      assert(list.items[1].kind == "ConfigMap" and list.items[1].apiVersion == "v1")
      list = assert(c:list("ConfigMap", { namespace = ns, field_selector = "metadata.name=two" }))
      assert(#list.items == 1 and list.items[1].metadata.name == "two", "field selector")
      local all = assert(c:list("Namespace"))
      assert(#all.items >= 4)
      local everywhere = assert(c:list("ConfigMap", { all_namespaces = true }))
      assert(#everywhere.items > #list.items)

      assert(c:delete("ConfigMap", "one", { namespace = ns }))
      local gone, err = c:get("ConfigMap", "one", ns)
      assert(gone == nil and err.reason == "NotFound" and err.code == 404, tostring(err))
      local _, again = c:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "two", namespace = ns } }
      assert(again.reason == "AlreadyExists" and again.code == 409)
      print("ok")
    ]]):format(ns))
  end)

  it("pages through long lists", function()
    local out = luaop.ok(([[
      local luaop = require "luaop"
      local core = require "luaop.core"
      local c = luaop.client()
      for i = 1, 7 do
        assert(c:create { apiVersion = "v1", kind = "ConfigMap",
          metadata = { name = "page-" .. i, namespace = %q, labels = { paged = "yes" } } })
      end
      local before = core.api.requests()
      local list = assert(c:list("ConfigMap", { namespace = %q, label_selector = "paged=yes", limit = 2 }))
      print("items", #list.items, "requests", core.api.requests() - before)
    ]]):format(ns, ns))
    assert.matches("items\t7\trequests\t4", out)
  end)

  it("reports a stale resourceVersion as Conflict and never overwrites", function()
    luaop.ok(([[
      local c = require("luaop").client()
      local cm = assert(c:create { apiVersion = "v1", kind = "ConfigMap",
        metadata = { name = "stale", namespace = %q }, data = { v = "0" } })
      local fresh = assert(c:get("ConfigMap", "stale", %q))
      fresh.data.v = "1"
      assert(c:update(fresh))
      cm.data.v = "2" -- an old copy
      local res, err = c:update(cm)
      assert(res == nil and err.reason == "Conflict" and err.code == 409, tostring(err))
      assert(c:get("ConfigMap", "stale", %q).data.v == "1")
    ]]):format(ns, ns, ns))
  end)

  it("patches with merge, JSON and strategic merge patches", function()
    luaop.ok(([[
      local luaop = require "luaop"
      local c = luaop.client()
      local ns = %q
      assert(c:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "p", namespace = ns },
        data = { a = "1", b = "2" } })
      local m = assert(c:patch("ConfigMap", "p", { data = { a = "10", b = luaop.null } }, { namespace = ns }))
      assert(m.data.a == "10" and m.data.b == nil, "merge patch; null removes")
      local j = assert(c:patch("ConfigMap", { namespace = ns, name = "p" },
        { { op = "add", path = "/data/c", value = "3" } }, { type = "json" }))
      assert(j.data.c == "3", "json patch")
      local s = assert(c:patch("ConfigMap", "p", { metadata = { labels = { x = "y" } } },
        { namespace = ns, type = "strategic" }))
      assert(s.metadata.labels.x == "y", "strategic merge patch")
      local _, err = c:patch("ConfigMap", "p", { { op = "test", path = "/data/a", value = "nope" } },
        { namespace = ns, type = "json" })
      assert(err and err.code == 422 and err.reason == "Invalid", "failed test op: " .. tostring(err and err.code) .. " " .. tostring(err))
    ]]):format(ns))
  end)

  it("applies server-side, with conflicts between field managers and force", function()
    luaop.ok(([[
      local c = require("luaop").client()
      local obj = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "ssa", namespace = %q },
                    data = { owner = "alice" } }
      local a = assert(c:apply(obj, { field_manager = "alice" }))
      assert(a.data.owner == "alice")
      local mine
      for _, mf in ipairs(a.metadata.managedFields) do mine = mine or mf.manager == "alice" end
      assert(mine, "alice manages the fields")
      obj.data.owner = "bob"
      local _, err = c:apply(obj, { field_manager = "bob" })
      assert(err and err.reason == "Conflict", "another manager's field: " .. tostring(err))
      local b = assert(c:apply(obj, { field_manager = "bob", force = true }))
      assert(b.data.owner == "bob")
    ]]):format(ns))
  end)

  it("deletes with preconditions and propagation policy", function()
    luaop.ok(([[
      local c = require("luaop").client()
      local ns = %q
      local cm = assert(c:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "d", namespace = ns } })
      local _, err = c:delete("ConfigMap", "d", { namespace = ns, preconditions = { uid = "not-the-uid" } })
      assert(err and err.reason == "Conflict", tostring(err))
      assert(c:delete("ConfigMap", "d", { namespace = ns, propagation = "Foreground",
        preconditions = { uid = cm.metadata.uid } }))
      local _, gone
      for _ = 1, 50 do
        _, gone = c:get("ConfigMap", "d", ns)
        if gone then break end
        require("luaop").sleep(0.1)
      end
      assert(gone and gone.reason == "NotFound")
    ]]):format(ns))
  end)

  it("finds a CRD installed while it runs, keeps int64s, and writes status through /status", function()
    local group = ns:gsub("[^%w]", "") .. ".e2e.luaop.dev"
    luaop.ok(([[
      local luaop = require "luaop"
      local c = luaop.client()
      local ns, group = %q, %q
      local kind = group .. "/v1/Gadget"
      local _, err = c:get(kind, "g", ns)
      assert(err and err.reason == "NotFound", "no such kind yet")

      assert(c:create { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
        metadata = { name = "gadgets." .. group },
        spec = { group = group, scope = "Namespaced",
          names = { plural = "gadgets", singular = "gadget", kind = "Gadget" },
          versions = { { name = "v1", served = true, storage = true, subresources = { status = {} },
            schema = { openAPIV3Schema = { type = "object", properties = {
              spec = { type = "object", properties = { big = { type = "integer", format = "int64" },
                                                       tags = { type = "array", items = { type = "string" } } } },
              status = { type = "object", properties = { phase = { type = "string" } } } } } } } } } })
      local established
      for _ = 1, 100 do
        local crd = assert(c:get("CustomResourceDefinition", "gadgets." .. group))
        local conds = crd.status and crd.status.conditions -- null while the CRD is new
        for _, cond in ipairs(type(conds) == "table" and conds or {}) do
          established = established or (cond.type == "Established" and cond.status == "True")
        end
        if established then break end
        luaop.sleep(0.1)
      end
      assert(established, "CRD established")

      local g, cerr
      for _ = 1, 50 do -- the apiserver may take a moment to serve it
        g, cerr = c:create { apiVersion = group .. "/v1", kind = "Gadget", metadata = { name = "g", namespace = ns },
          spec = { big = 9007199254740993, tags = luaop.array() } }
        if g then break end
        luaop.sleep(0.1)
      end
      assert(g, tostring(cerr))
      assert(math.type(g.spec.big) == "integer" and g.spec.big == 9007199254740993, "int64 survives")
      assert(luaop.json.is_array(g.spec.tags), "[] stays an array")

      -- status goes through /status; an update of the object ignores it
      g.status = { phase = "Running" }
      local s = assert(c:update_status(g))
      assert(s.status.phase == "Running")
      s.status.phase = "Ignored"
      s.spec.big = 1
      local u = assert(c:update(s))
      assert(u.status.phase == "Running" and u.spec.big == 1)
      local p = assert(c:patch(kind, "g", { status = { phase = "Done" } }, { namespace = ns, status = true }))
      assert(p.status.phase == "Done")
      assert(c:delete("CustomResourceDefinition", "gadgets." .. group))
    ]]):format(ns, group))
  end)

  it("speaks HTTP/2 to the API server over one kept-alive connection", function()
    local _, err = luaop.ok([[
      local luaop = require "luaop"
      local c = luaop.client()
      for i = 1, 5 do assert(c:get("Namespace", "default")) end
      local tasks = {}
      for i = 1, 10 do tasks[i] = luaop.spawn(function() return assert(c:get("Namespace", "default")) end) end
      for _, t in ipairs(tasks) do assert(t:wait()) end
    ]], { flags = { "-v", "2", "--log-format", "json" } })
    local json = require("luaop.core").json
    local responses, new = 0, 0
    for line in err:gmatch("[^\n]+") do
      local rec = json.decode(line)
      if rec and rec.msg == "response" then
        responses = responses + 1
        assert.are.equal(2, rec.http)
        if rec.newConnection then new = new + 1 end
      end
    end
    assert.is_true(responses >= 15)
    assert.are.equal(1, new)
  end)

  it("exits cleanly while tasks still wait on requests, watches and timers", function()
    local code, out, err = luaop.run(([[
      local luaop = require "luaop"
      local c = luaop.client()
      local w = assert(c:watch("ConfigMap", { namespace = %q }))
      luaop.spawn(function() w:next() end)
      luaop.spawn(function() luaop.sleep(3600) end)
      for i = 1, 20 do luaop.spawn(function() c:list("Namespace") end) end
      print("leaving")
      return 0
    ]]):format(ns))
    assert.are.equal(0, code, err)
    assert.matches("leaving", out)
    assert.are.equal("", err) -- no sanitizer report
  end)

  it("runs requests of many tasks at once on one thread", function()
    local out = luaop.ok(([[
      local luaop = require "luaop"
      local c = luaop.client()
      local tasks = {}
      for i = 1, 20 do
        tasks[i] = luaop.spawn(function()
          return assert(c:create { apiVersion = "v1", kind = "ConfigMap",
            metadata = { name = "par-" .. i, namespace = %q } }).metadata.name
        end)
      end
      local names = {}
      for i, t in ipairs(tasks) do
        local ok, name = t:wait()
        assert(ok, name)
        names[#names + 1] = name
      end
      print("created", #names)
      local failing = luaop.spawn(function() error("boom") end)
      local ok, err = failing:wait()
      print("child error", ok, err:match("boom") ~= nil)
    ]]):format(ns))
    assert.matches("created\t20", out)
    assert.matches("child error\tfalse\ttrue", out)
  end)
end)

describe("watch", function()
  local ns

  setup(function()
    ns = kube.new_namespace("e2e-watch")
  end)

  teardown(function()
    if ns then kube.delete_namespace(ns) end
  end)

  it("streams ADDED, MODIFIED and DELETED while another task writes", function()
    local out = luaop.ok(([[
      local luaop = require "luaop"
      local c = luaop.client()
      local ns = %q
      local list = assert(c:list("ConfigMap", { namespace = ns }))
      local w <close> = assert(c:watch("ConfigMap", { namespace = ns,
        resource_version = list.metadata.resourceVersion, timeout = 30 }))
      local writer = luaop.spawn(function()
        local cm = assert(c:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "w", namespace = ns } })
        cm.data = { k = "v" }
        assert(c:update(cm))
        assert(c:delete("ConfigMap", "w", { namespace = ns }))
      end)
      local seen = {}
      for typ, obj in w:events() do
        if typ ~= "BOOKMARK" and obj.metadata.name == "w" then
          seen[#seen + 1] = typ
          if typ == "DELETED" then break end
        end
      end
      assert(writer:wait())
      print(table.concat(seen, " "))
    ]]):format(ns))
    assert.matches("ADDED MODIFIED DELETED", out)
  end)

  it("ends at the server's timeout, and reports a compacted resourceVersion as Expired", function()
    -- a resourceVersion, then writes after it, then etcd compacted past it.
    -- PodTemplates bypass the API server's watch cache in the local control
    -- plane (hack/kwok/kwokctl.yaml), so etcd's compaction shows.
    local pt = kube.json.decode(kube.must({ "create", "-f", "-", "-o", "json" }, ([[
apiVersion: v1
kind: PodTemplate
metadata: {name: old, namespace: %s}
template: {spec: {containers: [{name: c, image: busybox}]}}
]]):format(ns)))
    for i = 1, 3 do kube.must { "label", "podtemplate", "old", "-n", ns, "--overwrite", "v=" .. i } end
    assert(os.execute("hack/cluster.sh compact 2>/dev/null"))
    local out = luaop.ok(([[
      local luaop = require "luaop"
      local c = luaop.client()
      local w = assert(c:watch("ConfigMap", { namespace = %q, timeout = 1 }))
      local n = 0
      for _ in w:events() do n = n + 1 end
      print("ended", w.err == nil)
      w:close()
      local old = assert(c:watch("PodTemplate", { namespace = %q, resource_version = %q }))
      local typ, err = old:next()
      print("expired", typ, err and err.code, err and err.reason)
      old:close()
    ]]):format(ns, ns, pt.metadata.resourceVersion))
    assert.matches("ended\ttrue", out)
    assert.matches("expired\tnil\t410\tExpired", out)
  end)
end)
