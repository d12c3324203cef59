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
        for _, o in pairs(inf.store) do
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
