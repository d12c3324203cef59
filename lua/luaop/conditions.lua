-- luaop.conditions - an object's status.conditions as apimachinery's
-- meta.SetStatusCondition, RemoveStatusCondition, FindStatusCondition and
-- IsStatusConditionTrue/False keep them (metav1.Condition). Re-exported by
-- luaop as luaop.conditions.
local core = require "luaop.core"
local time = require "luaop.time"

local M = {}

local json = core.json
local null = json.null

-- (strings, not tables: what scripts' calls reach is no table they share;
-- spec/unit/reach_spec.lua)
local FIELDS = "type, status, reason, message, observedGeneration, lastTransitionTime"
local function known(k)
  for f in FIELDS:gmatch("%w+") do
    if f == k then return true end
  end
  return false
end
local function valid_status(s) return s == "True" or s == "False" or s == "Unknown" end
local MAX_TYPE, MAX_PREFIX, MAX_NAME = 316, 253, 63
local MAX_REASON, MAX_MESSAGE = 1024, 32768

-- A value as an error message shows it (long strings cut).
local function shown(v)
  if type(v) == "string" then
    if #v > 60 then return ("a string of %d bytes, %q..."):format(#v, v:sub(1, 40)) end
    return ("the string %q"):format(v)
  end
  if v == null then return "luaop.null" end
  if type(v) == "number" or type(v) == "boolean" then return ("the %s %s"):format(type(v), tostring(v)) end
  if v == nil then return "nil" end
  return "a " .. type(v)
end

-- A condition's type: an optional DNS subdomain prefix and "/", then a
-- qualified name (apimachinery's ValidateCondition, and the pattern and
-- maxLength metav1.Condition gives a CRD's schema).
local function type_problem(t)
  if type(t) ~= "string" or t == "" then return "is required: a string such as \"Ready\"" end
  if #t > MAX_TYPE then return ("must be at most %d bytes"):format(MAX_TYPE) end
  local prefix, name = t:match("^([^/]*)/(.*)$")
  if prefix then
    if prefix == "" or #prefix > MAX_PREFIX then
      return ("has a prefix (before the /) that is not a DNS subdomain of 1 to %d characters"):format(MAX_PREFIX)
    end
    for label in (prefix .. "."):gmatch("([^.]*)%.") do
      if not (label:match("^[a-z0-9]$") or label:match("^[a-z0-9][-a-z0-9]*[a-z0-9]$")) then
        return "has a prefix (before the /) that is not a DNS subdomain (lower case letters, digits, - and .)"
      end
    end
  else
    name = t
  end
  local ok = name:match("^[A-Za-z0-9]$") or name:match("^[A-Za-z0-9][-A-Za-z0-9_.]*[A-Za-z0-9]$")
  if #name > MAX_NAME or not ok then
    return ("must be a name of 1 to %d letters, digits, -, _ and ., starting and ending with a letter or digit, "
      .. "optionally after a DNS subdomain and / (\"Ready\", \"example.com/Synced\")"):format(MAX_NAME)
  end
end

-- A condition's reason: one CamelCase word (metav1.Condition's pattern).
local function reason_problem(r)
  if type(r) ~= "string" or r == "" then return "is required: one CamelCase word such as \"Reconciled\"" end
  if #r > MAX_REASON then return ("must be at most %d bytes"):format(MAX_REASON) end
  if not r:match("^[A-Za-z][A-Za-z0-9_,:]*$") or r:match("[,:]$") then
    return "must be one CamelCase word: a letter, then letters, digits, _, , or : (not last), no spaces"
  end
end

-- The condition given to set, checked and copied: a metav1.Condition's
-- fields as Lua values (message "" and observedGeneration nil for none),
-- lastTransitionTime nil when not given.
local function checked(obj, c)
  if type(c) ~= "table" then
    return nil, ("the condition must be a table {type =, status =, reason =, ...}, got %s"):format(shown(c))
  end
  for k in pairs(c) do
    if not known(k) then
      local hint = ""
      local plain = tostring(k):gsub("_", ""):lower()
      for f in FIELDS:gmatch("%w+") do
        if f:lower() == plain then hint = (" (did you mean %s?)"):format(f) end
      end
      return nil, ("the condition has a field a metav1.Condition does not: %s%s; its fields are %s"):format(
        (shown(k):gsub("^the string ", "")), hint, FIELDS)
    end
  end
  local problem = type_problem(c.type)
  if problem then return nil, ("type %s, got %s"):format(problem, shown(c.type)) end
  if not valid_status(c.status) then
    return nil, ("status must be \"True\", \"False\" or \"Unknown\", got %s"):format(shown(c.status))
  end
  problem = reason_problem(c.reason)
  if problem then return nil, ("reason %s, got %s"):format(problem, shown(c.reason)) end
  local message = c.message
  if message == nil then message = "" end
  if type(message) ~= "string" then return nil, ("message must be a string, got %s"):format(shown(message)) end
  if #message > MAX_MESSAGE then
    return nil, ("message must be at most %d bytes, got %d"):format(MAX_MESSAGE, #message)
  end
  local gen, from = c.observedGeneration, "observedGeneration"
  if gen == nil then
    gen, from = type(obj.metadata) == "table" and obj.metadata.generation or 0, "metadata.generation"
  end
  local g = math.type(gen) and math.tointeger(gen)
  if not g or g < 0 then
    return nil, ("%s must be an integer >= 0, got %s"):format(from, shown(gen))
  end
  local ltt = c.lastTransitionTime
  if ltt ~= nil then
    local t, err = ltt, nil
    if type(ltt) == "string" then
      t, err = time.parse(ltt)
    elseif type(ltt) ~= "number" or ltt ~= ltt or ltt == math.huge or ltt == -math.huge then
      t, err = nil, "a time must be an RFC 3339 string or a finite number of seconds since the epoch"
    end
    local text = t and time.format(t)
    if not text then
      return nil, ("lastTransitionTime: %s, got %s"):format(err or "outside the years 0000 to 9999", shown(ltt))
    end
    ltt = text -- as metav1.Time writes it: UTC, whole seconds
  end
  return { type = c.type, status = c.status, reason = c.reason, message = message,
    observedGeneration = g ~= 0 and g or nil, lastTransitionTime = ltt }
end

-- obj.status.conditions, or nil; err when obj is not an object or its
-- status or conditions are not tables (JSON null counts as absent).
local function list_of(obj)
  if type(obj) ~= "table" then return nil, ("obj must be an object (a table), got %s"):format(shown(obj)) end
  local status = obj.status
  if status == nil or status == null then return nil end
  if type(status) ~= "table" then return nil, ("obj.status must be a table, got %s"):format(shown(status)) end
  local list = status.conditions
  if list == nil or list == null then return nil end
  if type(list) ~= "table" then return nil, ("obj.status.conditions must be a list, got %s"):format(shown(list)) end
  return list
end

-- A list a script made as a plain table is marked a JSON array (so that,
-- empty, it is written [] and not {}).
local function keep_array(list)
  if not json.is_array(list) and getmetatable(list) == nil then json.array(list) end
end

local function find(list, ctype)
  for _, c in ipairs(list or {}) do
    if type(c) == "table" and c.type == ctype then return c end
  end
  return nil
end

local function check_type(form, ctype)
  if type(ctype) ~= "string" then error(("%s: type must be a string, got %s"):format(form, shown(ctype)), 3) end
end

-- set(obj, condition) -> changed: meta.SetStatusCondition on
-- obj.status.conditions (status and the list made when absent). A new type
-- is appended, its lastTransitionTime the one given or now; an existing
-- one takes the new status (and lastTransitionTime, the given one or now)
-- only when the status differs, and the new reason, message and
-- observedGeneration, each only when it differs. changed: whether anything
-- did. observedGeneration defaults to obj.metadata.generation.
function M.set(obj, condition)
  local form = "conditions.set(obj, condition)"
  local list, err = list_of(obj)
  if err then error(form .. ": " .. err, 2) end
  local new
  new, err = checked(obj, condition)
  if not new then error(form .. ": " .. err, 2) end
  local existing = find(list, new.type)
  if not existing then
    if not list then
      if obj.status == nil or obj.status == null then obj.status = {} end
      list = json.array()
      obj.status.conditions = list
    else
      keep_array(list)
    end
    new.lastTransitionTime = new.lastTransitionTime or time.format(time.wall())
    list[#list + 1] = new
    return true
  end
  local changed = false
  if existing.status ~= new.status then
    existing.status = new.status
    existing.lastTransitionTime = new.lastTransitionTime or time.format(time.wall())
    changed = true
  end
  if (existing.reason or "") ~= new.reason then
    existing.reason = new.reason
    changed = true
  end
  if (existing.message or "") ~= new.message then
    existing.message = new.message
    changed = true
  end
  if (existing.observedGeneration or 0) ~= (new.observedGeneration or 0) then
    existing.observedGeneration = new.observedGeneration
    changed = true
  end
  return changed
end

-- get(obj, type) -> the condition of that type (the table in the list:
-- a change to it changes obj), or nil.
function M.get(obj, ctype)
  local form = "conditions.get(obj, type)"
  local list, err = list_of(obj)
  if err then error(form .. ": " .. err, 2) end
  check_type(form, ctype)
  return find(list, ctype)
end

-- remove(obj, type) -> removed: every condition of that type taken out,
-- the others kept in order (the list stays a JSON array, [] when empty).
function M.remove(obj, ctype)
  local form = "conditions.remove(obj, type)"
  local list, err = list_of(obj)
  if err then error(form .. ": " .. err, 2) end
  check_type(form, ctype)
  if not list then return false end
  local n, kept = #list, 0
  for i = 1, n do
    local c = list[i]
    if not (type(c) == "table" and c.type == ctype) then
      kept = kept + 1
      list[kept] = c
    end
  end
  for i = kept + 1, n do list[i] = nil end
  keep_array(list)
  return kept ~= n
end

-- is_true(obj, type), is_false(obj, type): whether the condition is there
-- with status "True" ("False"); absent is neither.
function M.is_true(obj, ctype)
  local form = "conditions.is_true(obj, type)"
  local list, err = list_of(obj)
  if err then error(form .. ": " .. err, 2) end
  check_type(form, ctype)
  local c = find(list, ctype)
  return c ~= nil and c.status == "True"
end

function M.is_false(obj, ctype)
  local form = "conditions.is_false(obj, type)"
  local list, err = list_of(obj)
  if err then error(form .. ": " .. err, 2) end
  check_type(form, ctype)
  local c = find(list, ctype)
  return c ~= nil and c.status == "False"
end

return M
