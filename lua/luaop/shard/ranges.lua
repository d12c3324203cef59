-- luaop.shard.ranges - sets of ranges of the 64-bit hash space that
-- sharded controllers divide (docs/sharding.md). A set is a sorted list of
-- disjoint, non-adjacent ranges {lo, last}, inclusive, each bound a Lua
-- integer read as its unsigned bits (so the whole space, which the API
-- server ends at 0x10000000000000000, is {0, -1}); compare with math.ult.
-- Also the two texts a set is written as: the API server's shardSelector
-- (`shardRange(object.metadata.namespace, '0x…', '0x…') || …`, bounds of
-- 16 lower-case hex digits, the end exclusive) and the compact list kept in
-- a member's Lease (`lo-last,lo-last` in hex).
local M = {}

local ult = math.ult
local MAX = -1 -- 0xffffffffffffffff

local function le(a, b) return a == b or ult(a, b) end

-- The set of the ranges given (any order, overlapping or touching ones
-- merged).
function M.normalize(list)
  local r = {}
  for _, x in ipairs(list) do r[#r + 1] = { x[1], x[2] } end
  table.sort(r, function(a, b) return ult(a[1], b[1]) end)
  local out = {}
  for _, x in ipairs(r) do
    local top = out[#out]
    if top and (top[2] == MAX or le(x[1], top[2] + 1)) then
      if ult(top[2], x[2]) then top[2] = x[2] end
    else
      out[#out + 1] = x
    end
  end
  return out
end

M.ALL = { { 0, MAX } }

function M.contains(set, h)
  local lo, hi = 1, #set
  while lo <= hi do
    local mid = (lo + hi) // 2
    local r = set[mid]
    if ult(h, r[1]) then hi = mid - 1
    elseif ult(r[2], h) then lo = mid + 1
    else return true end
  end
  return false
end

-- a ∪ b
function M.union(a, b)
  local all = {}
  for _, x in ipairs(a) do all[#all + 1] = x end
  for _, x in ipairs(b) do all[#all + 1] = x end
  return M.normalize(all)
end

-- a ∩ b
function M.intersect(a, b)
  local out, i, j = {}, 1, 1
  while i <= #a and j <= #b do
    local x, y = a[i], b[j]
    local lo = ult(x[1], y[1]) and y[1] or x[1]
    local last = ult(x[2], y[2]) and x[2] or y[2]
    if le(lo, last) then out[#out + 1] = { lo, last } end
    if ult(x[2], y[2]) then i = i + 1 else j = j + 1 end
  end
  return out
end

-- a \ b
function M.subtract(a, b)
  local out = {}
  for _, x in ipairs(a) do
    local lo, last, gone = x[1], x[2], false
    for _, y in ipairs(b) do
      if not (ult(y[2], lo) or ult(last, y[1])) then -- they overlap
        if ult(lo, y[1]) then out[#out + 1] = { lo, y[1] - 1 } end
        if y[2] == MAX or not ult(y[2], last) then gone = true break end
        lo = y[2] + 1
      end
    end
    if not gone then out[#out + 1] = { lo, last } end
  end
  return M.normalize(out)
end

function M.equal(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i][1] ~= b[i][1] or a[i][2] ~= b[i][2] then return false end
  end
  return true
end

-- What fraction of the space the set covers (0 to 1).
function M.share(set)
  local n = 0.0
  for _, r in ipairs(set) do
    n = n + (math.ult(r[2], r[1]) and 0 or (r[2] - r[1]) % 2 ^ 64 + 1)
  end
  return n / 2 ^ 64
end

-- At most max ranges covering set: the smallest gaps between its ranges
-- filled in (a superset; for a selector of bounded length, the rest
-- filtered by whoever uses it).
function M.coarsen(set, max)
  if #set <= max then return set end
  local gaps = {}
  for i = 2, #set do gaps[#gaps + 1] = { set[i][1] - set[i - 1][2], i } end
  table.sort(gaps, function(a, b)
    if a[1] ~= b[1] then return ult(a[1], b[1]) end
    return a[2] < b[2]
  end)
  local fill = {}
  for k = 1, #set - max do fill[gaps[k][2]] = true end
  local out = { { set[1][1], set[1][2] } }
  for i = 2, #set do
    if fill[i] then out[#out][2] = set[i][2] else out[#out + 1] = { set[i][1], set[i][2] } end
  end
  return out
end

local function hex(v) return ("0x%016x"):format(v) end

-- The API server's shardSelector for the set, over field
-- ("object.metadata.namespace" or "object.metadata.uid"); nil for the
-- whole space (no selector) and "" for none (the caller sends nothing:
-- the server refuses an empty selector).
function M.selector(set, field)
  if #set == 1 and set[1][1] == 0 and set[1][2] == MAX then return nil end
  local parts = {}
  for _, r in ipairs(set) do
    local stop = r[2] == MAX and "0x10000000000000000" or hex(r[2] + 1)
    parts[#parts + 1] = ("shardRange(%s, '%s', '%s')"):format(field, hex(r[1]), stop)
  end
  return table.concat(parts, " || ")
end

-- The set a shardSelector names (as the API server echoes it in
-- metadata.shardInfo.selector), and its field; nil and why when it is not one.
function M.parse_selector(s)
  if type(s) ~= "string" then return nil, "not a string" end
  local out, field = {}, nil
  for part in (s .. " || "):gmatch("(.-)%s*||%s*") do
    local f, a, b = part:match("^%s*shardRange%(%s*([%w%.]+)%s*,%s*'0x(%x+)'%s*,%s*'0x(%x+)'%s*%)%s*$")
    if not f then return nil, ("not a shardRange: %q"):format(part) end
    if field and f ~= field then return nil, "ranges over two fields" end
    field = f
    local lo = math.tointeger(tonumber(a, 16))
    local last
    if b == "10000000000000000" then last = MAX else last = (tonumber(b, 16) or 0) - 1 end
    if not lo then return nil, "bad bound" end
    out[#out + 1] = { lo, last }
  end
  return M.normalize(out), field
end

-- The compact text kept in a member's Lease: "lo-last,…" in hex, "" for none.
function M.encode(set)
  local parts = {}
  for _, r in ipairs(set) do parts[#parts + 1] = ("%x-%x"):format(r[1], r[2]) end
  return table.concat(parts, ",")
end

-- The set from that text; nil when it is not one (a Lease written by
-- another program: counted as claiming nothing by the caller).
function M.decode(s)
  if type(s) ~= "string" then return nil end
  local out = {}
  for part in s:gmatch("[^,]+") do
    local a, b = part:match("^(%x+)%-(%x+)$")
    if not a or #a > 16 or #b > 16 then return nil end
    local lo, last = math.tointeger(tonumber(a, 16)), math.tointeger(tonumber(b, 16))
    if not lo or not last or ult(last, lo) then return nil end
    out[#out + 1] = { lo, last }
  end
  return M.normalize(out)
end

M.hex = hex

return M
