-- luaop.retry - how a controller retries, and when it does not.
--
-- Its `retry` policy: client-go's DefaultTypedControllerRateLimiter, the
-- longer wait of a per-key exponential backoff (base_delay doubling to
-- max_delay, forgotten on success) and an overall token bucket (qps,
-- burst), with client-go's values unless the definition says others:
--   retry = { base_delay = 0.005, max_delay = 1000, qps = 10, burst = 100 }
-- qps = math.huge is golang.org/x/time/rate's Inf: no overall bucket.
-- The work queue (luaop.core.workqueue) is made with these and re-tuned,
-- not rebuilt, when a reload changes them: no key is lost.
--
-- Terminal errors: controller-runtime's reconcile.TerminalError. A
-- reconcile that raises or returns luaop.terminal(message) is not retried
-- (the key is forgotten); it is logged as "Reconciler error" with
-- "terminal error: " before the message, a Warning Event TerminalError
-- goes on the object, and it counts in both reconcile_errors_total and
-- terminal_reconcile_errors_total. The next event of the object queues
-- it again as usual.
local client_errors = require "luaop.client.errors"
local events = require "luaop.events"

local M = {}

-- client-go's workqueue.DefaultTypedControllerRateLimiter
M.DEFAULTS = { base_delay = 0.005, max_delay = 1000, qps = 10, burst = 100 }
M.FIELDS = { "base_delay", "max_delay", "qps", "burst" }

local shown = client_errors.shown

local function finite(v) return type(v) == "number" and v == v and v > -math.huge and v < math.huge end

-- Everything wrong with def.retry, as definition.problems lists problems
-- (field "retry": reported at that field's line); name: the controller's
-- as its messages show it; nearest(word, candidates): a misspelt key's
-- likely meaning.
function M.problems(def, name, nearest)
  local r, out = def.retry, {}
  if r == nil then return out end
  local function fail(fmt, ...)
    out[#out + 1] = { field = "retry", message = ("controller %s: " .. fmt):format(name, ...) }
  end
  if type(r) ~= "table" then
    fail("retry is a table { base_delay = seconds, max_delay = seconds, qps = per second, burst = n }, got %s",
      shown(r))
    return out
  end
  local base, max, qps, burst = rawget(r, "base_delay"), rawget(r, "max_delay"), rawget(r, "qps"), rawget(r, "burst")
  local base_ok = base == nil or (finite(base) and base > 0)
  if not base_ok then
    fail("retry.base_delay must be a number of seconds > 0 (the first backoff), got %s", shown(base))
  end
  if max ~= nil then
    local floor = base_ok and (base or M.DEFAULTS.base_delay) or 0
    if not finite(max) or max <= 0 or max < floor then
      fail("retry.max_delay must be a number of seconds >= retry.base_delay (%g), got %s", floor, shown(max))
    end
  elseif base_ok and base and base > M.DEFAULTS.max_delay then
    fail("retry.base_delay %s is above max_delay's default (%g s): give max_delay too", shown(base),
      M.DEFAULTS.max_delay)
  end
  if qps ~= nil and not (type(qps) == "number" and qps > 0) then -- (NaN is not > 0)
    fail("retry.qps must be a number > 0 (adds a second; math.huge: no overall limit), got %s", shown(qps))
  end
  if burst ~= nil and (math.type(burst) ~= "integer" or burst < 1 or burst > 1000000000) then
    fail("retry.burst must be an integer from 1 to 10^9, got %s", shown(burst))
  end
  local keys = {}
  for k in pairs(r) do
    if not (k == "base_delay" or k == "max_delay" or k == "qps" or k == "burst") then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local near = type(k) == "string" and nearest and nearest(k, M.FIELDS)
    out[#out + 1] = { field = "retry", unknown = true,
      message = ("controller %s: retry: unknown field %s%s"):format(name,
        type(k) == "string" and k or ("[" .. tostring(k) .. "]"), near and (" (did you mean %s?)"):format(near) or "") }
  end
  return out
end

-- The work queue's parameters for def (its retry policy over the
-- defaults), with extra's fields besides (a name, a metrics owner).
function M.options(def, extra)
  local r = type(def) == "table" and type(def.retry) == "table" and def.retry or {}
  local o = {}
  for k, v in pairs(extra or {}) do o[k] = v end
  for _, f in ipairs(M.FIELDS) do
    local v = rawget(r, f)
    if v == nil then v = M.DEFAULTS[f] end
    o[f] = v
  end
  if o.qps == math.huge then o.qps = 0 end -- the queue's "no bucket"
  return o
end

-- A reload: c's queue takes def's policy, keeping every key it holds.
function M.tune(c, def)
  c.queue:tune(M.options(def))
end

-- ---- terminal errors ---------------------------------------------------------

local Terminal = {
  __name = "luaop.terminal",
  __metatable = false, -- (shared by every script's values: none may change it)
  __tostring = function(t) return "terminal error: " .. tostring(rawget(t, "message")) end,
}

local getinfo = debug and debug.getinfo

-- luaop.terminal(message): an error that is not retried. message: a
-- string, or an API error (its text). Raise it (error(luaop.terminal(...)))
-- or return it from reconcile.
function M.terminal(message)
  if client_errors.is_error(message) then
    message = client_errors.error_text(message)
  elseif type(message) ~= "string" then
    error(("terminal needs a message (a string or an API error), got %s"):format(shown(message)), 2)
  end
  -- where it was made: what a returned one is logged with (one raised
  -- is at the line that raised it); none when made in a tail call
  -- (`return luaop.terminal(...)`), whose caller's frame is gone: the
  -- worker names the reconcile's line then
  local info = getinfo and not getinfo(1, "t").istailcall and getinfo(2, "Sl")
  local where = info and info.currentline > 0 and info.source:sub(1, 1) == "@"
    and ("%s:%d"):format(info.source:sub(2), info.currentline) or nil
  -- (terminal = true, read raw, is what the scheduler and the worker see:
  -- sched_failure says "terminal")
  return setmetatable({ terminal = true, message = message, where = where }, Terminal)
end

-- What reconcile returned, when it is a terminal error: { terminal = text }
-- (read raw: no code of the script's runs). nil otherwise.
function M.returned(r)
  if type(r) ~= "table" or rawget(r, "terminal") ~= true then return nil end
  local message, where = rawget(r, "message"), rawget(r, "where")
  message = type(message) == "string" and message or "(no message)"
  return { terminal = type(where) == "string" and where .. ": " .. message or message }
end

-- The text of a failed reconcile's terminal error, or nil when it was
-- none: ok, res, why as task:wait gave them (res the located text), or
-- the result M.returned made.
function M.terminal_text(ok, res, why)
  if not ok then
    return why == "terminal" and tostring(res):match("^[^\n]*") or nil
  end
  return type(res) == "table" and res.terminal or nil
end

-- A reconcile of c ended in a terminal error (its text): counted as an
-- error and a terminal one, logged, a Warning Event on the object when it
-- is still there, and the key forgotten (not requeued).
function M.failed(c, key, ns, name, text)
  local m = c.metrics
  m.errors:add()
  m.terminal:add()
  c.errors = c.errors + 1
  local err = "terminal error: " .. text
  c.log:error("Reconciler error", { namespace = ns, name = name, error = err })
  local obj = c.primary and c.primary.inf:get(ns and ns .. "/" .. name or name)
  if obj then
    events.record { regarding = obj, type = "Warning", controller = c.name, script = c.script,
      reason = "TerminalError", note = err }
  end
  c.queue:forget(key)
end

return M
