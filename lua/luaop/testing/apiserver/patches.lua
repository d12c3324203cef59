-- luaop.testing.apiserver.patches - merge, JSON and strategic merge patches; a part of luaop.testing.apiserver.
local core = require "luaop.core"
local json = core.json
local null, array, is_array = json.null, json.array, json.is_array
local values_part = require "luaop.testing.apiserver.values"
local copy, has, is_object, same = values_part.copy, values_part.has, values_part.is_object, values_part.same
local status_part = require "luaop.testing.apiserver.status"
local bad_request, failure = status_part.bad_request, status_part.failure

-- ---- patches -------------------------------------------------------------------------

-- RFC 7386 into target, a table of the caller's (changed in place).
local function merge_into(target, patch)
  for key, v in pairs(patch) do
    if v == null then
      target[key] = nil
    elseif is_object(v) then
      local t = target[key]
      target[key] = merge_into(is_object(t) and t or {}, v)
    else
      target[key] = copy(v)
    end
  end
  return target
end

-- Strategic merge patch: lists with a merge key merge by it, finalizers
-- merge as a set; every other list is replaced. $patch: delete|replace,
-- $deleteFromPrimitiveList/<list> are understood; $setElementOrder and
-- $retainKeys are ignored. An approximation of the schema-driven original.
local MERGE_KEYS = {
  containers = "name", initContainers = "name", ephemeralContainers = "name", volumes = "name", env = "name",
  volumeMounts = "mountPath", imagePullSecrets = "name", conditions = "type", ownerReferences = "uid",
  hostAliases = "ip", ports = "port",
}
local MERGE_SETS = { finalizers = true }

local strategic_into

local function merge_list(key, cur, patch)
  local out = array(copy(cur))
  if MERGE_SETS[key] then
    for _, v in ipairs(patch) do
      if not has(out, v) then out[#out + 1] = copy(v) end
    end
    return out
  end
  local mk = MERGE_KEYS[key]
  if key == "ports" and is_object(patch[1]) and patch[1].containerPort ~= nil then mk = "containerPort" end
  for _, item in ipairs(patch) do
    if is_object(item) and item["$patch"] == "replace" then
      local only = array()
      for _, x in ipairs(patch) do
        if not (is_object(x) and x["$patch"]) then only[#only + 1] = copy(x) end
      end
      return only
    end
  end
  for _, item in ipairs(patch) do
    local at
    for i, x in ipairs(out) do
      if is_object(item) and is_object(x) and item[mk] ~= nil and x[mk] == item[mk] then at = i end
    end
    if is_object(item) and item["$patch"] == "delete" then
      if at then table.remove(out, at) end
    elseif at then
      out[at] = strategic_into(out[at], item)
    else
      local new = copy(item)
      if is_object(new) then new["$patch"] = nil end
      out[#out + 1] = new
    end
  end
  return out
end

local function strategic_field(target, key, v)
  if v == null or (is_object(v) and v["$patch"] == "delete") then
    target[key] = nil
  elseif is_object(v) then
    local t = target[key]
    target[key] = strategic_into(is_object(t) and t or {}, v)
  elseif is_array(v) and is_array(target[key]) and (MERGE_KEYS[key] or MERGE_SETS[key]) then
    target[key] = merge_list(key, target[key], v)
  else
    target[key] = copy(v)
  end
end

strategic_into = function(target, patch)
  if patch["$patch"] == "replace" then
    local out = copy(patch)
    out["$patch"] = nil
    return out
  end
  for key, v in pairs(patch) do
    -- directives ($...) are applied after the fields
    if not (type(key) == "string" and key:sub(1, 1) == "$") then strategic_field(target, key, v) end
  end
  for key, v in pairs(patch) do
    local list = type(key) == "string" and key:match("^%$deleteFromPrimitiveList/(.+)$")
    if list and is_array(v) and is_array(target[list]) then
      local out = array()
      for _, x in ipairs(target[list]) do
        if not has(v, x) then out[#out + 1] = x end
      end
      target[list] = out
    end
  end
  return target
end

-- RFC 6902 on doc (changed in place): the new document | nil, failure.
local function pointer(path)
  if type(path) ~= "string" or (path ~= "" and path:sub(1, 1) ~= "/") then return nil end
  local toks = {}
  for tok in (path:sub(2) .. "/"):gmatch("(.-)/") do
    toks[#toks + 1] = (tok:gsub("~1", "/"):gsub("~0", "~"))
  end
  if path == "" then toks = {} end
  return toks
end

local function array_index(tok, n, append_ok)
  if append_ok and tok == "-" then return n + 1 end
  local i = tok:match("^%d+$") and tonumber(tok)
  if not i or i > (append_ok and n or n - 1) then return nil end
  return i + 1
end

-- The container holding the last token of toks, and that token.
local function parent_of(doc, toks)
  local c = doc
  for i = 1, #toks - 1 do
    if is_array(c) then
      local idx = array_index(toks[i], #c)
      c = idx and c[idx]
    elseif type(c) == "table" then
      c = c[toks[i]]
    else
      c = nil
    end
    if type(c) ~= "table" then return nil end
  end
  return c, toks[#toks]
end

local function get_at(doc, toks)
  if #toks == 0 then return doc end
  local c, last = parent_of(doc, toks)
  if not c then return nil end
  if is_array(c) then
    local idx = array_index(last, #c)
    return idx and c[idx]
  end
  return c[last]
end

local function add_at(doc, toks, value)
  if #toks == 0 then return value end
  local c, last = parent_of(doc, toks)
  if not c then return nil end
  if is_array(c) then
    local idx = array_index(last, #c, true)
    if not idx then return nil end
    table.insert(c, idx, value)
  else
    c[last] = value
  end
  return doc
end

local function remove_at(doc, toks)
  local c, last = parent_of(doc, toks)
  if not c or #toks == 0 then return nil end
  if is_array(c) then
    local idx = array_index(last, #c)
    if not idx then return nil end
    return table.remove(c, idx)
  end
  local v = c[last]
  c[last] = nil
  return v
end

local function json_patch(doc, ops)
  if not is_array(ops) then
    return nil, bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
  end
  -- The API server answers a patch that does not apply with a generic 422
  -- (NewGenericServerResponse drops json-patch's words); they are kept
  -- here as the cause, for the test's reader.
  local function fail(msg)
    return nil, failure(422, "Invalid", "the server rejected our request due to an error in our request",
      { causes = array { { message = msg } } })
  end
  for _, op in ipairs(ops) do
    if not is_object(op) then return fail("Unexpected kind: unknown object type") end
    local path = pointer(op.path)
    if not path then return fail(("add operation does not apply: doc is missing path: %q: missing value")
      :format(tostring(op.path))) end
    local value = op.value
    if value == nil then value = null end
    local kind = op.op
    if kind == "add" then
      local d = add_at(doc, path, copy(value))
      if d == nil then return fail(("add operation does not apply: doc is missing path: %q: missing value")
        :format(op.path)) end
      doc = d
    elseif kind == "remove" then
      if get_at(doc, path) == nil or remove_at(doc, path) == nil then
        return fail(("remove operation does not apply: doc is missing path: %q: missing value"):format(op.path))
      end
    elseif kind == "replace" then
      if get_at(doc, path) == nil then
        return fail(("replace operation does not apply: doc is missing key: %s: missing value"):format(op.path))
      end
      if #path == 0 then
        doc = copy(value)
      else
        remove_at(doc, path)
        doc = add_at(doc, path, copy(value))
      end
    elseif kind == "move" or kind == "copy" then
      local from = pointer(op.from)
      local v = from and get_at(doc, from)
      if v == nil then
        return fail(("%s operation does not apply: doc is missing from path: %s: missing value")
          :format(kind, tostring(op.from)))
      end
      if kind == "move" then remove_at(doc, from) else v = copy(v) end
      local d = add_at(doc, path, v)
      if d == nil then return fail(("%s operation does not apply: doc is missing destination path: %s: missing value")
        :format(kind, op.path)) end
      doc = d
    elseif kind == "test" then
      local v = get_at(doc, path)
      if v == nil then v = null end
      if not same(v, value) then return fail(("testing value %s failed: test failed"):format(op.path)) end
    else
      return fail(("Unexpected kind: %s: unknown object type"):format(tostring(kind)))
    end
  end
  return doc
end

local PATCH_TYPES = {
  ["application/merge-patch+json"] = "merge", ["application/json-patch+json"] = "json",
  ["application/strategic-merge-patch+json"] = "strategic", ["application/apply-patch+yaml"] = "apply",
}

local function unsupported_patch(k)
  local types = { "application/json-patch+json", "application/merge-patch+json" }
  if k.strategic then types[#types + 1] = "application/strategic-merge-patch+json" end
  types[#types + 1] = "application/apply-patch+yaml"
  return failure(415, "UnsupportedMediaType",
    "the body of the request was in an unknown format - accepted media types include: " .. table.concat(types, ", "))
end

return {
  PATCH_TYPES = PATCH_TYPES, json_patch = json_patch, merge_into = merge_into,
  strategic_into = strategic_into, unsupported_patch = unsupported_patch,
}
