-- luaop.testing.apiserver.prune - a custom resource's fields its CRD's
-- schema does not name are dropped on every write, as kube-apiserver's
-- structural pruning drops them (apiextensions-apiserver's
-- pkg/apiserver/schema/pruning): a status field the schema leaves out
-- (status.conditions without its schema) is not stored, so an operator
-- that writes it reads it back absent, in the kit as on a cluster.
--
--   - at the object's root (and in an x-kubernetes-embedded-resource),
--     apiVersion, kind and metadata are kept (metadata is the API
--     server's own, not the schema's);
--   - a field under properties is pruned by its schema, any other by
--     additionalProperties (true: kept whole), else dropped;
--   - x-kubernetes-preserve-unknown-fields keeps the unknown fields of its
--     level (and below them), its properties still pruned by theirs;
--   - an array's elements are pruned by items;
--   - a version with no schema prunes nothing (apiextensions.k8s.io/v1
--     requires one: such a CRD is the test's own shorthand).
-- The kit prunes and does not validate: a wrong type or a missing required
-- field is stored (docs/testing.md, "What the kit approximates").
local core = require "luaop.core"

local M = {}

local ROOT = { apiVersion = true, kind = true, metadata = true }

local is_array = core.json.is_array

local prune

-- what preserve-unknown-fields keeps: the known fields pruned, the rest left
local function keep(x, s)
  if type(x) ~= "table" then return end
  if is_array(x) then
    for _, v in ipairs(x) do
      if type(s) == "table" and type(s.items) == "table" then prune(v, s.items) else keep(v, nil) end
    end
    return
  end
  for key, v in pairs(x) do
    local props = type(s) == "table" and type(s.properties) == "table" and s.properties
    if props and type(props[key]) == "table" then
      prune(v, props[key])
    elseif type(s) == "table" and type(s.additionalProperties) == "table" then
      prune(v, s.additionalProperties)
    end
  end
end

-- x pruned in place by schema s (nil: nothing is known below here)
function prune(x, s, root)
  if type(x) ~= "table" then return end
  if type(s) == "table" and s["x-kubernetes-preserve-unknown-fields"] == true then return keep(x, s) end
  if is_array(x) then
    for _, v in ipairs(x) do prune(v, type(s) == "table" and s.items or nil) end
    return
  end
  root = root or (type(s) == "table" and s["x-kubernetes-embedded-resource"] == true)
  local props = type(s) == "table" and type(s.properties) == "table" and s.properties or {}
  local extra = type(s) == "table" and s.additionalProperties
  local gone = {}
  for key, v in pairs(x) do
    if not (root and ROOT[key]) then -- (those kept as the API server keeps them)
      if type(props[key]) == "table" then prune(v, props[key])
      elseif type(extra) == "table" then prune(v, extra)
      elseif extra ~= true then gone[#gone + 1] = key end
    end
  end
  for _, key in ipairs(gone) do x[key] = nil end
end

-- A custom resource obj pruned by schema (a version's openAPIV3Schema, or
-- nil: nothing pruned). Changes obj.
function M.object(obj, schema)
  if type(schema) == "table" then prune(obj, schema, true) end
  return obj
end

return M
