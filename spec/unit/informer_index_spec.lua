-- The informer's indexes (by namespace, by one label's value): a list that
-- names a namespace or a label reads one index entry instead of the whole
-- cache, and must answer exactly what the whole cache filtered answers,
-- whatever came and went before.
require "support.luaop"
local informer = require "luaop.informer"

-- the controller asking, on whose script's behalf a label index is held
local H = { script = "s.lua", name = "c" }

describe("luaop.informer's indexes", function()
  it("answer a list by namespace or label as a scan of the whole cache does, through adds, changes and deletes",
    function()
    math.randomseed(7)
    local inf = informer.new("v1/ConfigMap", { client = {} })
    local namespaces, values = { "a", "b", "c" }, { "x", "y", "z" }
    local uid = 0
    local function object(i)
      uid = uid + 1
      local labels = {}
      if math.random() < 0.7 then labels.machine = values[math.random(#values)] end
      if math.random() < 0.5 then labels.other = values[math.random(#values)] end
      return { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "o" .. i,
        namespace = namespaces[math.random(#namespaces)], uid = "u" .. uid, resourceVersion = tostring(uid),
        labels = next(labels) and labels or nil } }
    end
    local function names(list)
      local out = {}
      for _, o in ipairs(list) do out[#out + 1] = o.metadata.namespace .. "/" .. o.metadata.name end
      table.sort(out)
      return table.concat(out, " ")
    end
    local function check()
      for _, ns in ipairs { "a", "b", "c", "none" } do
        for _, v in ipairs { "x", "y", "z", "none" } do
          local function keep(o)
            return o.metadata.namespace == ns and (o.metadata.labels or {}).machine == v
          end
          assert.are.equal(names(inf:list(keep)),
            names(inf:list(keep, { namespace = ns, labels = { machine = v }, holder = H })))
          local function in_ns(o) return o.metadata.namespace == ns end
          assert.are.equal(names(inf:list(in_ns)), names(inf:list(in_ns, { namespace = ns })))
          local function labelled(o) return (o.metadata.labels or {}).other == v end
          assert.are.equal(names(inf:list(labelled)), names(inf:list(labelled, { labels = { other = v }, holder = H })))
        end
      end
    end
    -- some objects before any index exists, then an index made from them
    for i = 1, 50 do inf:upsert(object(i)) end
    check()
    -- then, with the indexes kept: new objects, changed labels and
    -- namespaces' objects replaced, deletes
    for _ = 1, 400 do
      local i = math.random(80)
      local r = math.random()
      if r < 0.6 then
        inf:upsert(object(i))
      else
        for _, o in inf:each() do
          if o.metadata.name == "o" .. i then inf:remove(o); break end
        end
      end
      check()
    end
    assert.is_true(inf.count > 10)
    -- a hint with no usable label or namespace reads the whole cache
    assert.are.equal(inf.count, #inf:list(nil, { labels = { [1] = "x" }, namespace = 3 }))
  end)
  it("holds a label index for the controllers that asked for it, at most 8 a script over every informer, and "
    .. "drops it when the last of them stops; none by namespace in an informer of one namespace", function()
    local function fill(inf)
      for i = 1, 20 do
        local labels = {}
        for k = 1, 12 do labels["k" .. k] = tostring(i % 3) end
        inf:upsert { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "o" .. i, namespace = "a",
          uid = "u" .. i, resourceVersion = tostring(i), labels = labels } }
      end
      return inf
    end
    local one = fill(informer.new("v1/ConfigMap", { client = {}, namespace = "a" }))
    local two = fill(informer.new("v1/Secret", { client = {} }))
    local a1, a2 = { script = "a.lua", name = "a1" }, { script = "a.lua", name = "a2" }
    local b1 = { script = "b.lua", name = "b1" }
    local function list(inf, k, holder)
      local function keep(o) return o.metadata.labels["k" .. k] == "1" end
      assert.are.equal(#inf:list(keep), #inf:list(keep, { namespace = "a", labels = { ["k" .. k] = "1" },
        holder = holder }))
    end
    local function indexes(inf)
      local names = {}
      for name in pairs(inf.indexes) do names[#names + 1] = name end
      table.sort(names, function(x, y) return tonumber(x:match("%d+") or 99) < tonumber(y:match("%d+") or 99) end)
      return names
    end
    -- a.lua's a1 lists by twelve labels over two informers: 8 indexes, the
    -- rest by a scan
    for k = 1, 6 do list(one, k, a1) end
    for k = 7, 12 do list(two, k, a1) end
    assert.are.equal(8, informer.indexes_held("a.lua"))
    assert.are.same({ "label:k1", "label:k2", "label:k3", "label:k4", "label:k5", "label:k6" }, indexes(one))
    assert.are.same({ "label:k7", "label:k8", "namespace" }, indexes(two))
    -- b.lua's lists get indexes of their own: a.lua's are no concern of theirs
    list(two, 9, b1)
    assert.are.same({ "label:k7", "label:k8", "label:k9", "namespace" }, indexes(two))
    assert.are.equal(1, informer.indexes_held("b.lua"))
    -- a2 takes one a.lua holds already: still 8
    list(one, 1, a2)
    assert.are.equal(8, informer.indexes_held("a.lua"))
    -- a1 stops: what only it held goes; a2's k1 and b1's k9 stay
    one:release_indexes(a1)
    two:release_indexes(a1)
    assert.are.same({ "label:k1" }, indexes(one))
    assert.are.same({ "label:k9", "namespace" }, indexes(two))
    assert.are.equal(1, informer.indexes_held("a.lua"))
    -- so a.lua may index other labels again
    list(two, 10, a2)
    assert.are.same({ "label:k9", "label:k10", "namespace" }, indexes(two))
    one:release_indexes(a2)
    two:release_indexes(a2)
    -- a reconcile of a2 still running once a2 stopped takes no hold (it
    -- would never be let go): a scan answers it
    a2.stopped = true
    list(one, 2, a2)
    assert.are.same({}, indexes(one))
    assert.are.equal(0, informer.indexes_held("a.lua"))
    two:stop() -- an informer's indexes go with it
    assert.are.same({}, indexes(one))
    assert.are.same({}, (function() local t = {} for n in pairs(two.holders) do t[#t + 1] = n end return t end)())
    assert.are.equal(0, informer.indexes_held("a.lua"))
    assert.are.equal(0, informer.indexes_held("b.lua"))
    -- a list by namespace in an informer of one namespace reads no index
    assert.are.equal(20, #one:list(nil, { namespace = "a" }))
    assert.is_nil(one.indexes.namespace)
  end)
end)

describe("luaop.informer's store", function()
  local json = require("luaop.core").json
  local function cm(name, rv, extra)
    local o = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = name, namespace = "ns", uid = "u-" .. name,
      resourceVersion = tostring(rv), labels = { app = "x" },
      managedFields = json.array { { manager = "kubectl", fieldsV1 = { ["f:data"] = {} } } } }, data = { k = "v" } }
    for k, v in pairs(extra or {}) do o.data[k] = v end
    return o
  end

  it("keeps each object as its compact JSON without managedFields, and hands every reader a fresh object", function()
    local inf = informer.new("v1/ConfigMap", { client = {} })
    local seen = {}
    inf:on { add = function(o) seen[#seen + 1] = "add " .. o.metadata.resourceVersion end,
      update = function(old, new)
        seen[#seen + 1] = ("update %s %s %s"):format(old.metadata.resourceVersion, new.metadata.resourceVersion,
          new.data.k)
      end,
      delete = function(o) seen[#seen + 1] = "delete " .. o.metadata.resourceVersion end }
    -- a watch event's text, as json.event cut it
    local typ, obj, text = json.event(json.encode { type = "ADDED", object = cm("a", 1) })
    inf:apply(typ, obj, text)
    assert.are.equal("string", type(inf.store["ns/a"]))
    assert.are.equal(text, inf.store["ns/a"])
    assert.is_nil(inf.store["ns/a"]:find("managedFields", 1, true))
    -- an object from elsewhere (a write's answer, a LIST page): encoded
    inf:upsert(cm("b", 2))
    assert.are.equal("string", type(inf.store["ns/b"]))
    local b = cm("b", 2)
    b.metadata.managedFields = nil
    assert.are.same(b, json.decode(inf.store["ns/b"]))
    -- reads: a fresh object each time, the reader's to change
    local one, two = inf:get("ns", "a"), inf:get("ns/a")
    assert.are_not.equal(one, two)
    assert.are.same(one, two)
    one.data.k, one.metadata.labels.app = "changed", "changed"
    assert.are.equal("v", inf:get("ns", "a").data.k)
    local listed = inf:list(function(o) return o.metadata.name == "a" end, { labels = { app = "x" },
      holder = { script = "s.lua" } })
    assert.are.equal(1, #listed)
    listed[1].data.k = "changed"
    assert.are.equal("v", inf:list(nil, { labels = { app = "x" } })[1].data.k)
    -- handlers are told with both states decoded, as before
    inf:apply("MODIFIED", cm("a", 3, { k = "w" }))
    inf:apply("MODIFIED", cm("a", 2)) -- older: ignored
    assert.is_true(inf:stale("ns/a", cm("a", 3)))
    assert.are.equal("w", inf:get("ns", "a").data.k)
    assert.are.same({ "x" }, (function()
      local t = {}
      for v in pairs(inf:index("label:app")) do t[#t + 1] = v end
      return t
    end)())
    inf:apply("DELETED", cm("a", 4))
    assert.is_nil(inf:get("ns", "a"))
    assert.are.same({ "add 1", "add 2", "update 1 3 w", "delete 3" }, seen)
    assert.are.equal("u-b", inf:uid("ns/b"))
    assert.is_nil(inf:uid("ns/a"))
  end)

  it("decodes of a watch event's object what its handlers read: metadata, the object, or the old one too",
    function()
    local function run(...)
      local inf = informer.new("v1/ConfigMap", { client = {} })
      local seen = {}
      inf:index("label:app") -- kept up to date from the metadata alone
      local function show(o) return o and (o.data and o.data.k or "meta " .. o.metadata.resourceVersion) or "nil" end
      for _, reads in ipairs { ... } do
        inf:on { reads = reads ~= "none" and reads or nil,
          add = function(o) seen[#seen + 1] = "add " .. show(o) end,
          update = function(old, new) seen[#seen + 1] = ("update %s %s"):format(show(old), show(new)) end }
      end
      for i, e in ipairs { { "ADDED", cm("a", 1) }, { "MODIFIED", cm("a", 2, { k = "w" }) } } do
        -- a watch's event: the object's metadata alone, beside its text
        local typ, obj, text = json.event(json.encode { type = e[1], object = e[2] }, nil, true)
        assert.is_nil(obj.data)
        inf:apply(typ, obj, text)
        assert.are.equal(i == 1 and "v" or "w", inf:get("ns", "a").data.k) -- the store has it whole
      end
      assert.are.same({ x = { ["ns/a"] = true } }, inf:index("label:app"))
      return seen
    end
    assert.are.same({ "add meta 1", "add meta 1", "update nil meta 2", "update nil meta 2" },
      run("metadata", "metadata"))
    assert.are.same({ "add v", "add v", "update nil w", "update nil w" }, run("metadata", "object"))
    assert.are.same({ "add v", "add v", "update v w", "update v w" }, run("object", "all"))
    assert.are.same({ "add v", "update v w" }, run("none")) -- (a handler that says nothing reads all)
    -- reads may be a function's answer (the manager's: what its subscribers read)
    local function funcs() return "metadata" end
    assert.are.same({ "add meta 1", "update nil meta 2" }, run(funcs))
  end)

  it("costs about the length of an object's text in the Lua heap, not twice it as tables did", function()
    local inf = informer.new("v1/ConfigMap", { client = {} })
    local lines, bytes = {}, 0
    for i = 1, 2000 do
      local o = cm(("cm-%05d"):format(i), i, { a = ("%08d"):format(i):rep(50), b = ("%08x"):format(i):rep(50) })
      o.metadata.uid = ("%08x-0000-4000-8000-%012x"):format(i, i)
      lines[i] = json.encode { type = "ADDED", object = o }
    end
    collectgarbage()
    collectgarbage()
    local before = collectgarbage("count")
    for i = 1, #lines do
      local typ, obj, text = json.event(lines[i])
      bytes = bytes + #text
      inf:apply(typ, obj, text)
    end
    collectgarbage()
    collectgarbage()
    local per_object = (collectgarbage("count") - before) * 1024 / #lines
    local ratio = per_object / (bytes / #lines)
    -- the text's string, its key's and the store's slot: 1.10 to 1.15 here
    -- (as decoded tables, 1.6 and more)
    assert.is_true(ratio < 1.25, ("%.0f B an object, %.2f its text"):format(per_object, ratio))
  end)
end)
