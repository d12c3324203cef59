-- luaop.webhook.patch - the RFC 6902 JSON patch that turns one decoded
-- object into another: what a mutating webhook answers, computed from the
-- object before and after its handler (as controller-runtime's
-- admission.PatchResponseFromRaw does with gomodules' jsonpatch).
--
-- Objects are compared member by member: a member gone is a "remove", a new
-- one an "add", a changed one a "replace" (or the members of both, when
-- both are objects). Arrays are never diffed element by element: an array
-- that changed in any way is replaced whole, so a patch never depends on
-- the positions of the elements of an array the API server holds (RFC 6902
-- array indices shift with each add and remove; a whole replace applies the
-- same however the operations are ordered). Members are taken in byte order
-- of their names, so the same change makes the same patch. Names are
-- written as JSON pointers (RFC 6901): "~" as "~0", "/" as "~1".
local core = require "luaop.core"

local is_array, null = core.json.is_array, core.json.null

local M = {}

-- A JSON pointer's reference token for a member name.
function M.escape(name)
  return (tostring(name):gsub("~", "~0"):gsub("/", "~1"))
end

local function is_object(v)
  return type(v) == "table" and not is_array(v)
end

-- Whether two decoded JSON values are equal (an array is never equal to an
-- object, not even empty ones: they encode differently).
local function equal(a, b)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" or is_array(a) ~= is_array(b) then return false end
  if is_array(a) then
    if #a ~= #b then return false end
    for i = 1, #a do
      if not equal(a[i], b[i]) then return false end
    end
    return true
  end
  for k, v in pairs(a) do
    if not equal(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end
M.equal = equal

local function sorted_keys(t, u)
  local keys, seen = {}, {}
  for _, x in ipairs { t, u } do
    for k in pairs(x) do
      if not seen[k] then
        seen[k] = true
        keys[#keys + 1] = k
      end
    end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

local function diff(a, b, path, ops)
  if equal(a, b) then return end
  if is_object(a) and is_object(b) then
    for _, k in ipairs(sorted_keys(a, b)) do
      local p = path .. "/" .. M.escape(k)
      local x, y = a[k], b[k]
      if y == nil then
        ops[#ops + 1] = { op = "remove", path = p }
      elseif x == nil then
        ops[#ops + 1] = { op = "add", path = p, value = y }
      else
        diff(x, y, p, ops)
      end
    end
    return
  end
  ops[#ops + 1] = { op = "replace", path = path, value = b == nil and null or b }
end

-- The operations that make before into after: a list (a JSON array), empty
-- when they are equal.
function M.diff(before, after)
  local ops = core.json.array {}
  diff(before, after, "", ops)
  return ops
end

-- ---- applying one (the kit reads a mutation back with it) -----------------------------

local function unescape(token)
  return (token:gsub("~1", "/"):gsub("~0", "~"))
end

-- The parent of a pointer's target and its last token: parent, key | nil, why
local function locate(doc, path)
  if path == "" then return nil, "" end
  if path:sub(1, 1) ~= "/" then return nil, nil, ("path %q is not a JSON pointer"):format(path) end
  local tokens = {}
  for t in path:sub(2):gmatch("([^/]*)") do tokens[#tokens + 1] = unescape(t) end
  local parent = doc
  for i = 1, #tokens - 1 do
    local t = tokens[i]
    if is_array(parent) then t = tonumber(t) and math.tointeger(tonumber(t)) + 1 end
    parent = type(parent) == "table" and t and parent[t] or nil
    if type(parent) ~= "table" then return nil, nil, ("path %q: no such member"):format(path) end
  end
  local last = tokens[#tokens]
  if is_array(parent) then
    if last == "-" then return parent, #parent + 1 end
    last = tonumber(last) and math.tointeger(tonumber(last))
    if not last then return nil, nil, ("path %q: not an index"):format(path) end
    return parent, last + 1
  end
  return parent, last
end

-- doc with ops applied (add, remove, replace): a new value, or nil, why.
-- (The operations luaop's diff makes; test and move and copy are not.)
function M.apply(doc, ops)
  doc = require("luaop.object").copy(doc)
  for _, op in ipairs(ops) do
    local parent, key, err = locate(doc, op.path)
    if err then return nil, err end
    local value = op.value
    if type(value) == "table" then value = require("luaop.object").copy(value) end
    if not parent then -- the whole document
      if op.op == "remove" then return nil, "cannot remove the whole document" end
      doc = value
    elseif op.op == "remove" or op.op == "replace" then
      if parent[key] == nil then return nil, ("%s %q: no such member"):format(op.op, op.path) end
      if op.op == "replace" then parent[key] = value
      elseif is_array(parent) then table.remove(parent, key)
      else parent[key] = nil end
    elseif op.op == "add" then
      if is_array(parent) then table.insert(parent, key, value) else parent[key] = value end
    else
      return nil, ("operation %q is not one luaop makes"):format(tostring(op.op))
    end
  end
  return doc
end

return M
