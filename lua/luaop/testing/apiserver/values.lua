-- luaop.testing.apiserver.values - values: deep copies, comparisons and the list helpers of the
-- in-memory API server; a part of luaop.testing.apiserver.
local core = require "luaop.core"
local json = core.json
local encode, decode, null, array, is_array = json.encode, json.decode, json.null, json.array, json.is_array

-- ---- values ----------------------------------------------------------------------

-- A deep copy (JSON arrays stay arrays).
local copy = require("luaop.object").copy

local function is_object(v) return type(v) == "table" and not is_array(v) end

-- Equal as JSON (keys are written sorted, so equal values write equal text).
local function same(a, b) return encode(a) == encode(b) end

-- Null members of objects go (a typed decoder, or a CR's pruning, would not
-- keep them); arrays keep theirs. Mutates v.
local function drop_nulls(v)
  if type(v) ~= "table" then return v end
  if is_array(v) then
    for _, x in ipairs(v) do drop_nulls(x) end
    return v
  end
  for k, x in pairs(v) do
    if x == null then v[k] = nil else drop_nulls(x) end
  end
  return v
end

-- A table through JSON: arrays marked, however the caller built it; and
-- whether it may hold a null (false: its text has none, drop_nulls has
-- nothing to do). v may be JSON text already (a manifest's document:
-- luaop.testing.paths).
local function canonical(v)
  local ok, text = true, v
  if type(v) ~= "string" then ok, text = pcall(encode, v) end
  if not ok then error("not an object JSON can hold: " .. tostring(text), 3) end
  return decode(text), text:find("null", 1, true) ~= nil
end

local function has(list, x)
  for _, y in ipairs(list or {}) do
    if y == x then return true end
  end
  return false
end

local function without(list, x)
  local out = array()
  for _, y in ipairs(list or {}) do
    if y ~= x then out[#out + 1] = y end
  end
  return out
end

local function nonempty(s) return type(s) == "string" and s ~= "" end

-- The API server's timestamps: RFC 3339, UTC, seconds.
local function timestamp(t) return os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(t)) end

-- The object as one version serves it: apiVersion and kind set, the rest
-- shared (it is encoded or copied, never changed).
local function view(k, obj)
  local out = {}
  for key, v in pairs(obj) do out[key] = v end
  out.apiVersion, out.kind = k.gv, k.kind
  return out
end

-- What an Accept header asks for: "PartialObjectMetadata",
-- "PartialObjectMetadataList" (as client-go's metadata client asks), or nil.
local function wants_partial(accept)
  return type(accept) == "string" and accept:match("as=(PartialObjectMetadata%a*)") or nil
end

-- obj as a metadata-only read serves it; a list's items too.
local function partial(obj)
  if obj.items then
    local items = {}
    for i, o in ipairs(obj.items) do items[i] = partial(o) end
    return { apiVersion = "meta.k8s.io/v1", kind = "PartialObjectMetadataList", metadata = obj.metadata,
      items = setmetatable(items, getmetatable(obj.items)) }
  end
  return { apiVersion = "meta.k8s.io/v1", kind = "PartialObjectMetadata", metadata = obj.metadata }
end

return {
  canonical = canonical, copy = copy, drop_nulls = drop_nulls, has = has, is_object = is_object,
  nonempty = nonempty, same = same, timestamp = timestamp, view = view, without = without,
  wants_partial = wants_partial, partial = partial,
}
