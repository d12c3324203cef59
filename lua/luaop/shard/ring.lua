-- luaop.shard.ring - which member of a ring holds which part of the hash
-- space: a consistent hash ring with virtual nodes (Karger et al.; as
-- Cassandra's and timebertt/kubernetes-controller-sharding's rings). Each
-- member puts VNODES points on the ring, at the mixed FNV-1a 64 of
-- "identity#i"; a key's hash (the API server's, unmixed) belongs to
-- the member of the first point at or after it, wrapping around. A member
-- joining takes about 1/N of the space, from every other member a little;
-- one leaving gives its part to the others the same way; nothing else
-- moves (spec/unit/shard_ring_spec.lua measures both).
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

-- identities: a list of member identities (any order, no duplicates).
-- Returns identity -> its set of ranges (luaop.shard.ranges); together
-- they cover the space exactly once.
function M.assign(identities)
  local points = {}
  for _, id in ipairs(identities) do
    for i = 0, M.VNODES - 1 do
      points[#points + 1] = { point(id .. "#" .. i), id }
    end
  end
  local out = {}
  for _, id in ipairs(identities) do out[id] = {} end
  if #points == 0 then return out end
  -- by point, then by identity: two members' equal points (a collision)
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

return M
