-- Sharding's parts without a cluster (docs/sharding.md), in the spec
-- runner's own process (so the valgrind pass checks them): the hash (the
-- API server's FNV-1a 64), sets of ranges and the selector text the server
-- parses, the ring's assignment and how much of it a change of membership
-- moves, a LIST page filtered before it is decoded, and the manifests.
-- What luaop processes do in a ring is spec/unit/shard_ring_spec.lua.
local core = require "luaop.core"
local ranges = require "luaop.shard.ranges"
local ring = require "luaop.shard.ring"
local json = core.json

local MAX = -1

local partition = require("support.shard").partition

describe("shard hash", function()
  it("is FNV-1a 64 as Go's hash/fnv New64a, which the API server's shardSelector uses", function()
    -- vectors of the FNV reference (draft-eastlake-fnv) and Go's fnv tests
    assert.are.equal("cbf29ce484222325", ("%016x"):format(core.shard.hash("")))
    assert.are.equal("af63dc4c8601ec8c", ("%016x"):format(core.shard.hash("a")))
    assert.are.equal("85944171f73967e8", ("%016x"):format(core.shard.hash("foobar")))
  end)
end)

describe("shard ranges", function()
  it("write a selector the API server's parser takes: 16 lower-case hex digits, the end exclusive, the last "
    .. "end 0x10000000000000000, and read it back", function()
    local set = ranges.normalize { { 0, 3 }, { 0x10, 0x1f }, { -2, MAX } }
    local sel = ranges.selector(set, "object.metadata.namespace")
    assert.are.equal("shardRange(object.metadata.namespace, '0x0000000000000000', '0x0000000000000004') || "
      .. "shardRange(object.metadata.namespace, '0x0000000000000010', '0x0000000000000020') || "
      .. "shardRange(object.metadata.namespace, '0xfffffffffffffffe', '0x10000000000000000')", sel)
    local back, field = ranges.parse_selector(sel)
    assert.are.equal("object.metadata.namespace", field)
    assert.is_true(ranges.equal(set, back))
    assert.is_nil(ranges.selector(ranges.ALL, "object.metadata.uid")) -- everything: no selector
    assert.is_nil((ranges.parse_selector("shardRange(object.metadata.uid, 0x0, '0x1')")))
  end)

  it("merge, intersect and subtract over the unsigned space, the top end included", function()
    assert.are.equal("0-14", ranges.encode(ranges.normalize { { 5, 0x14 }, { 0, 4 }, { 2, 7 } }))
    assert.are.equal("0-63,c9-ffffffffffffffff", ranges.encode(ranges.subtract(ranges.ALL, { { 0x64, 0xc8 } })))
    assert.are.equal("64-c8", ranges.encode(ranges.intersect(ranges.ALL, { { 0x64, 0xc8 } })))
    assert.are.equal("", ranges.encode(ranges.subtract({ { 0x64, 0xc8 } }, ranges.ALL)))
    assert.are.equal("8000000000000000-ffffffffffffffff",
      ranges.encode(ranges.subtract(ranges.ALL, { { 0, 0x7fffffffffffffff } })))
    assert.is_true(ranges.contains({ { 0x8000000000000000, MAX } }, MAX))
    assert.is_false(ranges.contains({ { 0x8000000000000000, MAX } }, 0x7fffffffffffffff))
    assert.are.equal(0.5, ranges.share { { 0x8000000000000000, MAX } })
    assert.is_true(ranges.equal(ranges.decode(ranges.encode { { 1, 2 }, { 9, MAX } }), { { 1, 2 }, { 9, MAX } }))
    assert.is_nil(ranges.decode("zz-1"))
    assert.is_nil(ranges.decode("5-1")) -- last before lo
  end)

  it("coarsen to at most N ranges by filling the smallest gaps, a superset of what they cover", function()
    local set = ranges.normalize { { 0, 9 }, { 12, 19 }, { 100, 109 }, { 111, 119 }, { 1000, 1009 } }
    assert.are.equal("0-13,64-77,3e8-3f1", ranges.encode(ranges.coarsen(set, 3)))
    assert.are.equal(set, ranges.coarsen(set, 5))
    local big = {}
    for i = 0, 999 do big[#big + 1] = { i * 0x10000000000000 // 1, i * 0x10000000000000 // 1 + 5 } end
    big = ranges.normalize(big)
    local c = ranges.coarsen(big, 256)
    assert.are.equal(256, #c)
    assert.are.same({}, ranges.subtract(big, c))
  end)
end)

describe("shard ring", function()
  it("gives every hash to exactly one member, each about its share", function()
    for n = 1, 5 do
      local ids = {}
      for i = 1, n do ids[i] = "replica-" .. i .. "_" .. ("%08x"):format(i * 2654435761 % 2 ^ 32) end
      local a = ring.assign(ids)
      local sets = {}
      for _, id in ipairs(ids) do sets[#sets + 1] = a[id] end
      assert.is_true(partition(sets))
      for _, id in ipairs(ids) do
        local share = ranges.share(a[id])
        assert.is_true(share > 0.5 / n and share < 1.5 / n, ("%d members: %s holds %.3f"):format(n, id, share))
      end
    end
  end)

  it("moves about 1/N of the space when a member joins or leaves, and only to or from that member", function()
    local ids = { "a_1", "b_2", "c_3" }
    local before = ring.assign(ids)
    local after = ring.assign { "a_1", "b_2", "c_3", "d_4" }
    local moved = 0
    for _, id in ipairs(ids) do
      -- what a staying member loses goes to the new one only; it gains nothing
      assert.are.same({}, ranges.subtract(after[id], before[id]))
      moved = moved + ranges.share(ranges.subtract(before[id], after[id]))
    end
    assert.is_true(math.abs(moved - ranges.share(after["d_4"])) < 1e-9)
    assert.is_true(moved > 0.5 / 4 and moved < 1.5 / 4, ("moved %.3f"):format(moved))
    -- and one leaving: its part, to the others, nothing else
    local left = ring.assign { "a_1", "c_3" }
    assert.are.same({}, ranges.subtract(before["a_1"], left["a_1"]))
    assert.are.same({}, ranges.subtract(before["c_3"], left["c_3"]))
  end)
end)

describe("shard ring by namespace", function()
  -- how many of names each member's set holds
  local function counts(a, ids, names)
    local out = {}
    for _, id in ipairs(ids) do out[id] = 0 end
    for _, n in ipairs(names) do
      local h, owners = core.shard.hash(n), 0
      for id, set in pairs(a) do
        if ranges.contains(set, h) then
          out[id] = out[id] + 1
          owners = owners + 1
        end
      end
      assert.are.equal(1, owners, n)
    end
    return out
  end

  it("spreads namespaces whose names differ only at their end, which FNV-1a puts side by side", function()
    local ids = { "a_1", "b_2", "c_3" }
    for _, prefix in ipairs { "ns-", "team-", "luaop-shard-" } do
      local names = {}
      for i = 0, 299 do names[#names + 1] = prefix .. i end
      -- uniform points leave a member with (almost) none of them
      local uniform = counts(ring.assign(ids), ids, names)
      local least = math.huge
      for _, n in pairs(uniform) do least = math.min(least, n) end
      assert.is_true(least < 60, prefix .. ": the uniform ring was fair after all")
      local a = ring.assign_namespaces(ids, names)
      local sets = {}
      for _, id in ipairs(ids) do sets[#sets + 1] = a[id] end
      assert.is_true(partition(sets))
      -- ("" is a namespace too: 301, each member at most ceil(1.05 * 301 / 3))
      for id, n in pairs(counts(a, ids, names)) do
        assert.is_true(n >= 80 and n <= 106, ("%s: %s holds %d of 300"):format(prefix, id, n))
      end
    end
  end)

  it("moves about 1/N of the namespaces when a member joins, almost all to it, and a new namespace moves few others",
    function()
    local names = {}
    for i = 0, 299 do names[#names + 1] = "team-" .. i end
    local before = ring.assign_namespaces({ "a_1", "b_2", "c_3" }, names)
    local after = ring.assign_namespaces({ "a_1", "b_2", "c_3", "d_4" }, names)
    local moved, elsewhere = 0, 0
    for _, n in ipairs(names) do
      local h = core.shard.hash(n)
      for _, id in ipairs { "a_1", "b_2", "c_3" } do
        if ranges.contains(before[id], h) and not ranges.contains(after[id], h) then
          moved = moved + 1
          if not ranges.contains(after["d_4"], h) then elsewhere = elsewhere + 1 end
        end
      end
    end
    assert.is_true(moved >= 50 and moved <= 100, ("moved %d of 300"):format(moved))
    -- (bounded loads: a full member passes a namespace on, rarely)
    assert.is_true(elsewhere <= 6, ("%d moved between the members already there"):format(elsewhere))
    -- a namespace made: nearly every other keeps its member
    local more = { "brand-new" }
    for _, n in ipairs(names) do more[#more + 1] = n end
    local grown = ring.assign_namespaces({ "a_1", "b_2", "c_3" }, more)
    local changed = 0
    for _, n in ipairs(names) do
      local h = core.shard.hash(n)
      for _, id in ipairs { "a_1", "b_2", "c_3" } do
        if ranges.contains(before[id], h) ~= ranges.contains(grown[id], h) then changed = changed + 1 end
      end
    end
    assert.is_true(changed <= 6, ("a new namespace moved %d others"):format(changed / 2))
  end)
end)


describe("shard filter before decoding", function()
  -- (the API server does not apply the shardSelector: luaop filters, in C,
  -- what it can judge from the text, so an object of another shard is
  -- never decoded)
  local function ns_set(...)
    local set = {}
    for _, ns in ipairs { ... } do
      local h = core.shard.hash(ns)
      set[#set + 1] = { h, h }
    end
    return ranges.normalize(set)
  end

  it("leaves a LIST page's items of other namespaces out undecoded, keeping what it cannot judge", function()
    local deep = '{"metadata":{"name":"deep","namespace":"b"},"data":' .. ('{"a":'):rep(10300) .. "1"
      .. ("}"):rep(10300) .. "}"
    local page = '{"kind":"ConfigMapList","metadata":{"resourceVersion":"9"},"items":['
      .. '{"metadata":{"name":"in-a","namespace":"a"}},' .. deep .. ","
      .. '{"metadata":{"name":"in-b","namespace":"b"}},'
      .. '{"metadata":{"name":"escaped","namespace":"\\u0062"}},'
      .. '{"metadata":{"name":"twice","namespace":"a","namespace":"b"}},'
      .. '{"metadata":{"name":"cluster-scoped"}},'
      .. '{"metadata":{"name":"escaped-key","namespace":"a","n\\u0061mespace":"b"}}]}'
    local got, skipped, dropped = json.decode_page(page, "items", ns_set("a"))
    local names = {}
    for _, item in ipairs(got.items) do names[#names + 1] = item.metadata.name end
    -- "deep" (nested past the decoder's limit) was never decoded: not
    -- among the skipped; "twice" is judged by its last namespace, as
    -- decoded; what has escapes goes on, to be judged once decoded
    assert.are.same({ "in-a", "escaped", "cluster-scoped", "escaped-key" }, names)
    assert.are.same({}, skipped)
    assert.are.equal(3, dropped)
    assert.are.equal("9", got.metadata.resourceVersion)
    -- without a set, the same page as before
    local all, skipped_all, none = json.decode_page(page)
    assert.are.equal(6, #all.items)
    assert.are.equal(1, #skipped_all)
    assert.are.equal(0, none)
    assert.has_error(function() json.decode_page(page, "items", { { 2, 1 } }) end,
      "json.decode_page: shard: range 1 has lo past last")
  end)
end)

describe("shard manifests", function()
  it("deploy three replicas in the ring luaop instead of a leader, with exactly the Lease verbs the ring uses", function()
    local m = require "support.manifests"
    local objs = m.render("manifests/sharded")
    local d = m.find(objs, "Deployment", "luaop")
    assert.are.equal(3, d.spec.replicas)
    local args = table.concat(d.spec.template.spec.containers[1].args, " ")
    assert.matches("--shard-ring luaop", args, 1, true)
    assert.is_nil(args:find("--leader-elect", 1, true))
    local role = m.find(objs, "Role", "luaop-shard-ring")
    assert.are.same({ "get", "list", "create", "update", "delete" }, role.rules[1].verbs)
    assert.are.same({ "leases" }, role.rules[1].resources)
    local binding = m.find(objs, "RoleBinding", "luaop-shard-ring")
    assert.are.equal("luaop", binding.subjects[1].name)
  end)
end)
