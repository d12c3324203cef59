-- luaop.informer against the local control plane: the cache, its events,
-- and a relist after 410 that loses no delete.
local kube = require "support.kube"
local luaop = require "support.luaop"

-- Program prelude: an informer whose events are recorded in `events`, and
-- a wait for an event.
local prelude = [[
local luaop = require "luaop"
local informer = require "luaop.informer"
local c = luaop.client()
local ns = %q
local events = {}
local function record(inf)
  inf:on {
    add = function(o) events[#events + 1] = "add " .. o.metadata.name end,
    update = function(_, o) events[#events + 1] = "update " .. o.metadata.name end,
    delete = function(o) events[#events + 1] = "delete " .. o.metadata.name end,
  }
end
local function seen(e)
  for _, v in ipairs(events) do if v == e then return true end end
end
local function wait_for(e)
  for _ = 1, 200 do
    if seen(e) then return true end
    luaop.sleep(0.05)
  end
  error("no event " .. e .. " in " .. table.concat(events, ","))
end
]]

describe("luaop.informer", function()
  local ns

  setup(function()
    ns = kube.new_namespace("e2e-informer")
  end)

  teardown(function()
    if ns then kube.delete_namespace(ns) end
  end)

  it("syncs the cache from the API server (streamed, sendInitialEvents), then follows the watch", function()
    kube.must { "create", "configmap", "pre", "-n", ns, "--from-literal=k=v" }
    local out, err = luaop.ok((prelude .. [[
      local inf = informer.new("ConfigMap", { namespace = ns })
      record(inf)
      inf:start()
      inf:wait_synced()
      local pre = assert(inf:get(ns, "pre"))
      print("synced", pre.data.k, pre.metadata.managedFields == nil, seen("add pre"))
      local cm = assert(c:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "x", namespace = ns } })
      wait_for("add x")
      cm.data = { n = "1" }
      assert(c:update(cm))
      wait_for("update x")
      print("cached", inf:get(ns, "x").data.n)
      assert(c:delete("ConfigMap", "x", { namespace = ns }))
      wait_for("delete x")
      print("gone", inf:get(ns, "x") == nil, #inf:list(function(o) return o.metadata.name == "pre" end))
      inf:stop()
      inf.task:wait()
      print("relists", inf.relists)
    ]]):format(ns))
    assert.matches("synced\tv\ttrue\ttrue", out)
    assert.matches("cached\t1", out)
    assert.matches("gone\ttrue\t1", out)
    assert.matches("relists\t1", out)
    -- the one stream carried the sync and the events after it: kube-apiserver
    -- v1.37 gzips such a stream when asked, which failed it at its first
    -- event after the sync (the watch was made again)
    assert.is_nil(err:find("list/watch failed", 1, true), err)
  end)

  it("syncs a metadata-only cache (PartialObjectMetadata) from the API server, streamed and by paged LIST, and "
    .. "follows the watch, keeping each object's metadata alone as text", function()
    kube.must { "create", "configmap", "meta", "-n", ns, "--from-literal=big=" .. ("x"):rep(2000) }
    kube.must { "label", "configmap", "meta", "-n", ns, "team=a" }
    local out = luaop.ok((prelude .. [[
      for _, stream in ipairs { true, false } do
        informer.STREAM = stream
        local inf = informer.new("ConfigMap", { namespace = ns, metadata_only = true })
        record(inf)
        inf:start()
        inf:wait_synced()
        local m = assert(inf:get(ns, "meta"))
        local text = inf.store[ns .. "/meta"]
        print("synced", stream, m.kind, m.apiVersion, m.data == nil, m.metadata.labels.team,
          m.metadata.managedFields == nil, #text < 600, text:find("xxxx", 1, true) == nil)
        local cm = assert(c:get("ConfigMap", "meta", ns))
        cm.metadata.labels.team = stream and "b" or "c"
        assert(c:update(cm))
        for _ = 1, 200 do
          if inf:get(ns, "meta").metadata.labels.team == cm.metadata.labels.team then break end
          luaop.sleep(0.05)
        end
        print("followed", stream, inf:get(ns, "meta").metadata.labels.team, inf:get(ns, "meta").kind)
        inf:stop()
        inf.task:wait()
      end
    ]]):format(ns))
    assert.matches("synced	true	PartialObjectMetadata	meta.k8s.io/v1	true	a	true	true	true", out)
    assert.matches("followed	true	b	PartialObjectMetadata", out)
    assert.matches("synced	false	PartialObjectMetadata	meta.k8s.io/v1	true	b	true	true	true", out)
    assert.matches("followed	false	c	PartialObjectMetadata", out)
  end)

  it("lists again after a 410, turning what vanished meanwhile into deletes", function()
    local function create(name)
      return kube.json.decode(kube.must({ "create", "-f", "-", "-o", "json" }, ([[
apiVersion: v1
kind: PodTemplate
metadata: {name: %s, namespace: %s}
template: {spec: {containers: [{name: c, image: busybox}]}}
]]):format(name, ns)))
    end
    local a = create("a")
    create("b")
    local old_rv = a.metadata.resourceVersion
    for i = 1, 3 do kube.must { "label", "podtemplate", "b", "-n", ns, "--overwrite", "v=" .. i } end
    -- etcd forgets old_rv; PodTemplates skip the watch cache (hack/kwok/kwokctl.yaml)
    assert(os.execute("hack/cluster.sh compact 2>/dev/null"))
    local out = luaop.ok((prelude .. [[
      local inf = informer.new("PodTemplate", { namespace = ns })
      assert(inf:relist())
      record(inf)
      print("listed", inf:get(ns, "a") ~= nil, inf:get(ns, "b") ~= nil)
      -- while it is not watching: a delete and a create
      assert(c:delete("PodTemplate", "a", { namespace = ns }))
      assert(c:create { apiVersion = "v1", kind = "PodTemplate", metadata = { name = "c", namespace = ns },
        template = { spec = { containers = { { name = "c", image = "busybox" } } } } })
      -- resume watching from a resourceVersion etcd has compacted away
      inf.rv = %q
      inf:start()
      wait_for("delete a")
      wait_for("add c")
      print("relists", inf.relists, inf:get(ns, "a") == nil, inf:get(ns, "c") ~= nil)
      inf:stop()
    ]]):format(ns, old_rv))
    assert.matches("listed\ttrue\ttrue", out)
    assert.matches("relists\t2\ttrue\ttrue", out)
  end)
end)
