-- luaop.filter - event filters: which events of a controller's resource,
-- of an owned kind or of a watched kind go on to enqueue (or to its
-- handlers), as controller-runtime's predicates (builder.WithPredicates)
-- and kopf's `when=`. A filter is one of:
--   "generation" (or { generation = true }): an update passes when
--     metadata.generation changed (controller-runtime's
--     GenerationChangedPredicate: a status-only write does not reconcile);
--   { generation = true, labels = true, annotations = true }: an update
--     passes when any of those it asks changed (its Or with
--     LabelChangedPredicate, AnnotationChangedPredicate);
--   function(old, new) -> boolean: the script's; old is nil on an add, new
--     nil on a delete.
-- Adds and deletes always pass the table forms. An object without a
-- generation (a ConfigMap, a Secret) has all its updates pass "generation"
-- (kube-rs' predicates::generation; controller-runtime's drops them all):
-- there is no telling its spec from its status, and a filter that silently
-- dropped every change of them would be a trap. No filter: every event.
local core = require "luaop.core"
local copy = require("luaop.object").copy
local error_text = require("luaop.client.errors").error_text

local M = {}

-- What a filter table may ask, each a boolean.
M.OPTIONS = { "generation", "labels", "annotations" }

local WANT = 'want "generation", a table such as { generation = true, labels = true } or a function(old, new)'

-- What is wrong with v as a filter, or nil (nil: no filter).
function M.problem(v)
  if v == nil or v == "generation" or type(v) == "function" then return nil end
  if type(v) == "string" then return ("%q is not a filter: %s"):format(v, WANT) end
  if type(v) ~= "table" then return ("a %s is not a filter: %s"):format(type(v), WANT) end
  local known, any = {}, false
  for _, o in ipairs(M.OPTIONS) do known[o] = true end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    if not known[k] then
      return ("%s is not a filter option: want generation, labels, annotations (each true or false)"):format(
        type(k) == "string" and k or ("[" .. tostring(k) .. "]"))
    end
    if type(v[k]) ~= "boolean" then return ("%s must be true or false"):format(k) end
    any = any or v[k]
  end
  if not any then return ("%s asks for nothing: %s"):format("the table", WANT) end
  return nil
end

local same_map = require("luaop.object").same_map -- (labels, annotations; nil is empty)

local function md(o) return type(o) == "table" and type(o.metadata) == "table" and o.metadata or {} end

-- Whether an update from old to new changed what opts ({generation =,
-- labels =, annotations =}) asks; a generation missing on either side
-- counts as changed.
function M.changed(opts, old, new)
  local a, b = md(old), md(new)
  if opts.generation and (a.generation == nil or b.generation == nil or a.generation ~= b.generation) then
    return true
  end
  if opts.labels and not same_map(a.labels, b.labels) then return true end
  if opts.annotations and not same_map(a.annotations, b.annotations) then return true end
  return false
end

-- Where a script's function is written ("file.lua:12"), or "?".
local function line_of(f)
  local ok, line, source = pcall(core.check.line, f)
  if ok and type(source) == "string" and source:sub(1, 1) == "@" then return ("%s:%d"):format(source:sub(2), line) end
  return "?"
end

-- A filter's error with its traceback, made where it raised: the
-- script's frames, down to the xpcall luaop called it with. (A budget's
-- breach is told by call_limited instead: once breached, nothing may
-- allocate, this handler's traceback included.)
local function traceback(e)
  local text = core.traceback(error_text(e), 2)
  local cut = text:find("\n\t%[C%]: in function 'xpcall'")
  return cut and text:sub(1, cut - 1) or text
end

-- The event's pass(old, new) -> boolean for filter v, or nil when v is
-- nil (every event passes). A function runs in the informer's task as a
-- watch's map does: under budgets (a reconcile's instructions and memory),
-- on copies. One that raises, runs out of its budget or returns anything
-- but a boolean is logged on log with its traceback, and the event passes
-- (it may reconcile once too often; dropped, a change would go unseen
-- until the next event of the object). what: "resource", "owns v1/Pod",
-- "watches v1/Service", for the log.
function M.new(v, budgets, log, what)
  if v == nil then return nil end
  if type(v) == "function" then
    local at = line_of(v)
    return function(old, new)
      local ok, xok, res = core.task.call_limited(budgets, xpcall, v, traceback,
        old ~= nil and copy(old) or nil, new ~= nil and copy(new) or nil)
      if ok and xok and type(res) == "boolean" then return res end
      local err = not ok and error_text(xok) or not xok and res
        or ("returned %s: a filter returns true (the event passes) or false"):format(
          type(res) == "string" and ("%q"):format(res) or type(res))
      local o = md(new or old)
      log:error("event filter failed: the event passes", { filter = at, of = what,
        event = old == nil and "add" or new == nil and "delete" or "update",
        namespace = o.namespace, name = o.name, error = tostring(err) })
      return true
    end
  end
  local opts = v == "generation" and { generation = true } or v
  return function(old, new)
    return old == nil or new == nil or M.changed(opts, old, new)
  end
end

-- An owns entry's kind and filter: "v1/Pod", or { "v1/Pod", filter = f }.
function M.owned(entry)
  if type(entry) == "table" then return entry[1], entry.filter end
  return entry, nil
end

return M
