-- luaop.shard.ring - which member of a ring holds which part of the hash
-- space (docs/sharding.md). Points on the ring, each a member's; a key's
-- hash (the API server's FNV-1a 64, unmixed) belongs to the member of the
-- first point at or after it, wrapping around: each point owns the arc
-- from the point before it (exclusive) to itself.
--
-- assign: a consistent hash ring with virtual nodes (Karger et al.; as
-- Cassandra's and timebertt/kubernetes-controller-sharding's rings): each
-- member puts VNODES points at the mixed FNV-1a 64 of "identity#i". A
-- member joining takes about 1/N of the space, from every other member a
-- little; one leaving gives its part to the others the same way; nothing
-- else moves. For keys placed by uid, which spread evenly.
--
-- assign_namespaces: for keys placed by namespace, uniform points serve
-- badly: FNV-1a's top bits hardly change with a name's last bytes, so
-- "team-a" ... "team-d" or "ns-0" ... "ns-9" hash side by side and would
-- land on one member. Given the namespaces there are, the points are
-- theirs instead: each namespace is given to a member by rendezvous
-- hashing with bounded loads (the member with the highest mixed hash of
-- "identity\0ns" that is not full: a member joining takes about 1/N of
-- the namespaces, one leaving gives its own to the others, little else
-- moves) and owns the arc up to its hash.
-- A namespace made later falls in an arc that holds no other namespace,
-- so placing it moves only its own keys. (spec/unit/shard_spec.lua
-- measures both.)
local core = require "luaop.core"
local ranges = require "luaop.shard.ranges"

local M = {}

M.VNODES = 64

local ult = math.ult

-- A point's place: FNV-1a's top bits hardly change with the last bytes
-- ("a#1", "a#2" land side by side), so it is mixed by splitmix64's
-- finalizer (Steele et al.) to spread a member's points over the ring.
local function point(s)
  local z = core.shard.hash(s)
  z = (z ~ (z >> 30)) * -4658895280553007687 -- 0xbf58476d1ce4e5b9
  z = (z ~ (z >> 27)) * -7723592293110705685 -- 0x94d049bb133111eb
  return z ~ (z >> 31)
end

-- points: {place, identity} each; identity -> its set of ranges.
local function arcs(identities, points)
  local out = {}
  for _, id in ipairs(identities) do out[id] = {} end
  if #points == 0 then return out end
  -- by place, then by identity: two members' equal points (a collision)
  -- go to the same one everywhere
  table.sort(points, function(a, b)
    if a[1] ~= b[1] then return ult(a[1], b[1]) end
    return a[2] < b[2]
  end)
  local prev = points[#points][1] -- the arc of the first point wraps around
  for i, p in ipairs(points) do
    local list = out[p[2]]
    if i == 1 then
      if prev ~= -1 then list[#list + 1] = { prev + 1, -1 } end
      list[#list + 1] = { 0, p[1] }
    elseif p[1] ~= prev then
      list[#list + 1] = { prev + 1, p[1] }
    end
    prev = p[1]
  end
  for id, list in pairs(out) do out[id] = ranges.normalize(list) end
  return out
end

-- identities: a list of member identities (any order, no duplicates).
-- Returns identity -> its set of ranges (luaop.shard.ranges); together
-- they cover the space exactly once.
function M.assign(identities)
  local points = {}
  for _, id in ipairs(identities) do
    for i = 0, M.VNODES - 1 do points[#points + 1] = { point(id .. "#" .. i), id } end
  end
  return arcs(identities, points)
end

-- With bounded loads (Mirrokni, Thorup and Zadimoghaddam, "Consistent
-- hashing with bounded loads"): no member takes more than (1 + LOAD_SLACK)
-- times its share of the namespaces; one that is full passes a namespace
-- to the next member of its rendezvous order. The namespaces are placed in
-- an order of their own (their mixed hash), so every replica that sees the
-- same members and namespaces computes the same. Measured with 300
-- namespaces and three members: the largest holds at most 105 (0.35)
-- instead of up to 0.39, and a member joining moves 1 or 2 namespaces
-- between the others besides the ~1/N it takes.
M.LOAD_SLACK = 0.05

-- namespace -> its member, for all of names (no duplicates).
function M.owners(identities, names)
  local cap = math.ceil((1 + M.LOAD_SLACK) * #names / #identities)
  local order = {}
  for _, ns in ipairs(names) do order[#order + 1] = { point(ns), ns } end
  table.sort(order, function(a, b)
    if a[1] ~= b[1] then return ult(a[1], b[1]) end
    return a[2] < b[2]
  end)
  local load, out = {}, {}
  for _, id in ipairs(identities) do load[id] = 0 end
  for _, o in ipairs(order) do
    local ns, ranked = o[2], {}
    for _, id in ipairs(identities) do ranked[#ranked + 1] = { point(id .. "\0" .. ns), id } end
    table.sort(ranked, function(a, b)
      if a[1] ~= b[1] then return ult(b[1], a[1]) end
      return a[2] < b[2]
    end)
    for _, r in ipairs(ranked) do
      if load[r[2]] < cap then
        out[ns], load[r[2]] = r[2], load[r[2]] + 1
        break
      end
    end
  end
  return out
end

-- names: the namespaces there are (cluster-scoped keys, namespace "", are
-- counted too). Returns identity -> set, as assign.
function M.assign_namespaces(identities, names)
  if #identities == 0 then return {} end
  local all, seen = { "" }, { [""] = true }
  for _, ns in ipairs(names) do
    if not seen[ns] then
      seen[ns] = true
      all[#all + 1] = ns
    end
  end
  local owner, points = M.owners(identities, all), {}
  for _, ns in ipairs(all) do points[#points + 1] = { core.shard.hash(ns), owner[ns] } end
  return arcs(identities, points)
end

return M
