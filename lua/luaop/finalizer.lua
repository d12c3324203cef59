-- luaop.finalizer - a definition's `finalizer = "example.com/name"` and
-- `finalize = function(ctx, obj)`, with controller-runtime's semantics
-- (controllerutil.AddFinalizer/RemoveFinalizer, pkg/finalizer):
--   - a live object of the controller's kind that lacks the finalizer is
--     given it (an update of the object as cached: others' finalizers kept,
--     ours never twice; a Conflict when it changed meanwhile) before its
--     reconcile runs, so before reconcile's first write;
--   - an object being deleted (metadata.deletionTimestamp) is never given
--     it, and its reconcile is not called: when it carries the finalizer,
--     finalize(ctx, obj) is, and once that returns nothing the finalizer
--     (ours only) is removed by an update that fails with Conflict rather
--     than drop a concurrent change; finalize raising (or returning
--     luaop.requeue_after/requeue) keeps it, and finalize runs again, with
--     the key's backoff like a reconcile's error;
--   - an object gone is reconciled as always (ctx:get answers nil);
--   - an object that left a controller's label or field selector (its
--     label removed) is no longer the controller's: its cache dropped it,
--     and its deletion would wait for ever on a finalizer nobody removes.
--     Its finalizer is taken off (read live: the cache no longer has it),
--     as kopf releases an object its handlers' filters stop matching;
--     finalize is not called.
-- It all runs in the reconcile's task, under its budgets.
local core = require "luaop.core"

local M = {}

M.FIELDS = { "finalizer", "finalize" }

local function is_label(s) return #s <= 63 and s:match("^[a-z0-9][-a-z0-9]*$") ~= nil and s:sub(-1) ~= "-" end

-- What is wrong with a finalizer's name, as Kubernetes validates one a
-- controller sets (a qualified name, "prefix/name", whose prefix is a DNS
-- subdomain: a finalizer with no prefix is for Kubernetes' own), or nil.
function M.bad_name(f)
  if type(f) ~= "string" then return "a string" end
  local prefix, name = f:match("^([^/]*)/([^/]*)$")
  if not prefix then return "a qualified name with a domain prefix, such as \"example.com/cleanup\"" end
  local sub = prefix ~= "" and #prefix <= 253
  for label in (prefix .. "."):gmatch("(.-)%.") do sub = sub and is_label(label) end
  if not sub then
    return "a prefix that is a DNS subdomain (lower case alphanumerics, '-' and '.', labels of at most 63)"
  end
  if name == "" or #name > 63 or not (name:match("^%w[%w_%.%-]*$") and name:match("%w$")) then
    return "a name part of 1 to 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
  end
  return nil
end

-- def's finalizer problems, said by fail(field, fmt, ...) (name: the
-- controller's, as its messages show it).
function M.problems(def, fail, name)
  local f, fin = def.finalizer, def.finalize
  if f ~= nil then
    local bad = M.bad_name(f)
    if bad then
      fail("finalizer", "controller %s: finalizer must be %s, got %s", name, bad,
        type(f) == "string" and ("%q"):format(f) or type(f))
    end
  end
  if fin ~= nil and type(fin) ~= "function" then
    fail("finalize", "controller %s: finalize must be a function", name)
  end
  if f ~= nil and fin == nil then
    fail("finalizer", "controller %s: finalizer needs a finalize = function(ctx, obj) beside it", name)
  elseif fin ~= nil and f == nil then
    fail("finalize", "controller %s: finalize needs a finalizer = \"example.com/name\" beside it", name)
  end
  if (f ~= nil or fin ~= nil) and def.reconcile == nil then
    fail(f ~= nil and "finalizer" or "finalize", "controller %s: a finalizer needs a reconcile (not handlers)", name)
  end
end

-- Whether obj carries finalizer f.
function M.has(obj, f)
  for _, g in ipairs(obj.metadata.finalizers or {}) do
    if g == f then return true end
  end
  return false
end

-- obj's finalizers with f added (when absent) or removed: a JSON array.
local function with(obj, f, add)
  local out = core.json.array()
  for _, g in ipairs(obj.metadata.finalizers or {}) do
    if g ~= f then out[#out + 1] = g end
  end
  if add then out[#out + 1] = f end
  return out
end

-- The update that adds or removes f: raised when refused (a Conflict
-- among others: the key runs again from fresh state).
local function write(ctx, obj, f, add)
  obj.metadata.finalizers = with(obj, f, add)
  local res, err = ctx:update(obj)
  if not res then error(err, 0) end
end

-- What finalize returned: nil (done), or the requeue (or terminal error:
-- luaop.retry) it asked for, as reconcile's.
local function result(parse, r)
  local marker = type(r) == "table"
    and (next(r) == nil or rawget(r, "requeue_after") or rawget(r, "requeue") or rawget(r, "terminal") == true)
  if r == nil or marker then return parse(function() return r end) end
  error(("finalize returned a %s: return nothing (done: the finalizer is removed), luaop.requeue_after(seconds) "
    .. "or luaop.requeue()"):format(type(r)), 0)
end

-- An object of a controller with a selector that its cache does not hold:
-- when the API server has it with finalizer f and the selector no longer
-- selects it (not a cache that has not seen it yet), f is taken off.
local function release(c, def, ctx, req, f)
  local obj, err = c:get(def.resource, req)
  if not obj and err.reason ~= "NotFound" then error(err, 0) end
  if not (obj and M.has(obj, f)) then return end -- gone (the usual case), or never ours
  local name = "metadata.name=" .. req.name
  local sel
  sel, err = c:list(def.resource, { namespace = req.namespace, label_selector = def.label_selector,
    field_selector = def.field_selector and (def.field_selector .. "," .. name) or name })
  if not sel then error(err, 0) end
  if #sel.items > 0 then return end -- still selected: the cache is behind
  ctx.log:info("left the controller's selector: its finalizer removed", { finalizer = f })
  write(ctx, obj, f, false)
end

-- A reconcile's task: parse(fn, ctx, req) runs reconcile fn and reads
-- what it returned (luaop.worker's). Without a finalizer, just that.
-- c: the client, for what the controller's cache does not hold.
function M.run(parse, def, ctx, req, c)
  local f = def.finalizer
  if not f then return parse(def.reconcile, ctx, req) end
  local obj = ctx:get(def.resource, req)
  if not obj and c and (def.label_selector or def.field_selector) then release(c, def, ctx, req, f) end
  if obj and obj.metadata.deletionTimestamp then
    if not M.has(obj, f) then return nil end -- not ours to finalize (or done already)
    local r = result(parse, def.finalize(ctx, obj))
    if r then return r end
    obj = ctx:get(def.resource, req) -- as it is now (what finalize wrote is cached)
    if obj and M.has(obj, f) then write(ctx, obj, f, false) end
    return nil
  end
  if obj and not M.has(obj, f) then write(ctx, obj, f, true) end
  return parse(def.reconcile, ctx, req)
end

return M
