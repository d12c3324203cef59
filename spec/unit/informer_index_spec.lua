-- The informer's indexes (by namespace, by one label's value): a list that
-- names a namespace or a label reads one index entry instead of the whole
-- cache, and must answer exactly what the whole cache filtered answers,
-- whatever came and went before.
require "support.luaop"
local informer = require "luaop.informer"

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
          assert.are.equal(names(inf:list(keep)), names(inf:list(keep, { namespace = ns, labels = { machine = v } })))
          local function in_ns(o) return o.metadata.namespace == ns end
          assert.are.equal(names(inf:list(in_ns)), names(inf:list(in_ns, { namespace = ns })))
          local function labelled(o) return (o.metadata.labels or {}).other == v end
          assert.are.equal(names(inf:list(labelled)), names(inf:list(labelled, { labels = { other = v } })))
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
  it("keeps at most 8 label indexes, answering lists by other labels by a scan, and none by namespace in an "
    .. "informer of one namespace", function()
    local inf = informer.new("v1/ConfigMap", { client = {}, namespace = "a" })
    for i = 1, 20 do
      local labels = {}
      for k = 1, 12 do labels["k" .. k] = tostring(i % 3) end
      inf:upsert { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "o" .. i, namespace = "a",
        uid = "u" .. i, resourceVersion = tostring(i), labels = labels } }
    end
    for k = 1, 12 do
      local function keep(o) return o.metadata.labels["k" .. k] == "1" end
      assert.are.equal(#inf:list(keep), #inf:list(keep, { namespace = "a", labels = { ["k" .. k] = "1" } }))
    end
    local names = {}
    for name in pairs(inf.indexes) do names[#names + 1] = name end
    table.sort(names)
    assert.are.same({ "label:k1", "label:k2", "label:k3", "label:k4", "label:k5", "label:k6", "label:k7", "label:k8" },
      names)
    assert.are.equal(20, #inf:list(nil, { namespace = "a" }))
    assert.is_nil(inf.indexes.namespace)
  end)
end)
