-- luaop.testing.apiserver.selectors - label and field selectors, parsed as the API server
-- parses them; a part of luaop.testing.apiserver.
local status_part = require "luaop.testing.apiserver.status"
local bad_request = status_part.bad_request

-- ---- selectors -----------------------------------------------------------------------

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- Requirements split on the commas outside parentheses.
local function split_requirements(s)
  local parts, depth, start = {}, 0, 1
  for i = 1, #s do
    local c = s:sub(i, i)
    if c == "(" then
      depth = depth + 1
    elseif c == ")" then
      depth = depth - 1
    elseif c == "," and depth == 0 then
      parts[#parts + 1] = s:sub(start, i - 1)
      start = i + 1
    end
  end
  parts[#parts + 1] = s:sub(start)
  return parts
end

local KEY, VALUE = "([%w%._/%-]+)", "([%w%._%-]*)"

-- One requirement: a function of the labels, or nil.
local function label_requirement(part)
  local key = part:match("^!%s*" .. KEY .. "$")
  if key then return function(l) return l[key] == nil end end
  local op, set
  key, op, set = part:match("^" .. KEY .. "%s+(n?o?t?in)%s*(%b())$")
  if key and (op == "in" or op == "notin") then
    local values = {}
    for _, v in ipairs(split_requirements(set:sub(2, -2))) do
      v = trim(v)
      if not v:match("^" .. VALUE .. "$") then return nil end
      values[v] = true
    end
    if next(values) == nil then return nil end
    if op == "in" then return function(l) return l[key] ~= nil and values[l[key]] == true end end
    return function(l) return l[key] == nil or not values[l[key]] end
  end
  local value
  key, value = part:match("^" .. KEY .. "%s*!=%s*" .. VALUE .. "$")
  if key then return function(l) return l[key] ~= value end end
  key, value = part:match("^" .. KEY .. "%s*==?%s*" .. VALUE .. "$")
  if key then return function(l) return l[key] == value end end
  key, op, value = part:match("^" .. KEY .. "%s*([<>])%s*(%-?%d+)$")
  if key then
    local n = tonumber(value)
    return function(l)
      local v = l[key] and tonumber(l[key])
      if not v then return false end
      if op == ">" then return v > n end
      return v < n
    end
  end
  key = part:match("^" .. KEY .. "$")
  if key then return function(l) return l[key] ~= nil end end
  return nil
end

-- A label selector: a function of the object | nil, what is wrong.
local function parse_labels(s)
  s = trim(s or "")
  if s == "" then return function() return true end end
  local reqs = {}
  for _, part in ipairs(split_requirements(s)) do
    local req = label_requirement(trim(part))
    if not req then
      return nil, ("unable to parse requirement: %q is not a label selector requirement (key, !key, key=value, "
        .. "key!=value, key in (a,b), key notin (a,b))"):format(trim(part))
    end
    reqs[#reqs + 1] = req
  end
  return function(obj)
    local labels = obj.metadata.labels or {}
    for _, req in ipairs(reqs) do
      if not req(labels) then return false end
    end
    return true
  end
end

-- Fields whose absence reads "false", as the API server's field sets have them.
local BOOL_FIELDS = { ["spec.hostNetwork"] = true, ["spec.unschedulable"] = true }

local function field_value(k, obj, field)
  if field == "metadata.namespace" and not k.namespaced then return "" end
  local v = obj
  for part in (k.field_paths[field] or field):gmatch("[^.]+") do
    if type(v) ~= "table" then
      v = nil
      break
    end
    v = v[part]
  end
  if v == nil and BOOL_FIELDS[field] then return "false" end
  if type(v) == "string" then return v end
  if type(v) == "boolean" or math.type(v) then return tostring(v) end
  return ""
end

-- Terms of a field selector, split on unescaped commas: {key, op, value} | nil, err.
local function field_terms(s)
  local terms, parts, cur, i = {}, {}, {}, 1
  while i <= #s do
    local c = s:sub(i, i)
    if c == "\\" then
      cur[#cur + 1] = s:sub(i, i + 1)
      i = i + 1
    elseif c == "," then
      parts[#parts + 1] = table.concat(cur)
      cur = {}
    else
      cur[#cur + 1] = c
    end
    i = i + 1
  end
  parts[#parts + 1] = table.concat(cur)
  for _, part in ipairs(parts) do
    local key, op, value
    for j = 1, #part do
      if part:sub(j - 1, j - 1) ~= "\\" then
        for _, o in ipairs { "!=", "==", "=" } do
          if part:sub(j, j + #o - 1) == o then
            key, op, value = part:sub(1, j - 1), o, part:sub(j + #o)
            break
          end
        end
      end
      if key then break end
    end
    if not key then return nil, ("invalid selector: '%s'; can't understand '%s'"):format(s, part) end
    value = value:gsub("\\(.)", "%1")
    terms[#terms + 1] = { key = trim(key), op = op == "!=" and "!=" or "=", value = value }
  end
  return terms
end

-- A field selector of kind k: a function of the object | nil, what is wrong.
local function parse_fields(k, s)
  s = trim(s or "")
  if s == "" then return function() return true end end
  local terms, err = field_terms(s)
  if not terms then return nil, err end
  for _, t in ipairs(terms) do
    if not k.field_labels[t.key] then
      if k.field_style == "custom" then return nil, "field label not supported: " .. t.key end
      return nil, ('"%s" is not a known field selector: only "metadata.name", "metadata.namespace"'):format(t.key)
    end
  end
  return function(obj)
    for _, t in ipairs(terms) do
      local v = field_value(k, obj, t.key)
      if (t.op == "=") ~= (v == t.value) then return false end
    end
    return true
  end
end

local function selectors(k, q)
  local labels, err = parse_labels(q.labelSelector)
  if not labels then return nil, bad_request(err) end
  local fields
  fields, err = parse_fields(k, q.fieldSelector)
  if not fields then return nil, bad_request(err) end
  return function(obj) return labels(obj) and fields(obj) end
end

return { selectors = selectors }
