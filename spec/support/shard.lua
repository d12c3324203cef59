-- spec/support/shard.lua - what the sharding specs check of sets of ranges.
local ranges = require "luaop.shard.ranges"

local M = {}

-- Whether the sets of a list are disjoint and together the whole space;
-- and, when they are not, why (or what they cover).
function M.partition(sets)
  local all = {}
  for _, s in ipairs(sets) do
    if #ranges.intersect(all, s) > 0 then return false, "overlap" end
    all = ranges.union(all, s)
  end
  return ranges.equal(all, ranges.ALL), ("covers %s"):format(ranges.encode(all))
end

return M
