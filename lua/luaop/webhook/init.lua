-- luaop.webhook - the webhooks the scripts define (luaop.webhook.definition)
-- and the requests they answer, independent of the transport:
--   registry:handle(method, path, content_type, body) -> status, content_type, body
-- is all the server (luaop.webhook.server) and the kit's env:admit and
-- env:convert (luaop.testing.webhooks) call.
--
-- Webhooks come in sets, one per script, as controllers do
-- (Manager:set hands each script's to registry:set): a reload replaces its
-- handlers (a request already running finishes on the old one), a script
-- removed removes its paths, and a version that does not load changes
-- nothing (the old handlers keep serving). One path is one script's: a
-- second script defining it is refused, naming both (the reload is tried
-- again later, as for a controller name another script holds).
--
-- Each request's handler runs as a task of its own under its definition's
-- budgets (instructions and memory, as a reconcile's) and a wall deadline
-- (`timeout`, 5 s by default: under the API server's default 10 s
-- timeoutSeconds). An admission handler that raises, breaks a budget or
-- passes its deadline answers HTTP 500 with the error as text, so that the
-- configuration's failurePolicy decides (Fail refuses the request, Ignore
-- admits it); a conversion's answers result Failure with the message
-- (conversion has no failurePolicy: the API server's request fails with it).
-- Each is logged with its traceback. Metrics as controller-runtime's
-- webhook server keeps them, labelled by path:
-- controller_runtime_webhook_requests_total{webhook, code},
-- controller_runtime_webhook_latency_seconds{webhook},
-- controller_runtime_webhook_requests_in_flight{webhook}.
local core = require "luaop.core"
local logging = require "luaop.logging"
local wdef = require "luaop.webhook.definition"
local review = require "luaop.webhook.review"

local json = core.json
local error_text = require("luaop.client").error_text -- (an error value's own __tostring never runs)

local M = {}

-- The most tasks one request's handler may have live (itself and what it spawns).
M.MAX_TASKS = 100
M.CONVERT = "/convert"

local Registry = {}
Registry.__index = Registry

-- A registry. opts.account(script): the metrics account of a script (the
-- manager's: its series go with the script); opts.start(registry): called
-- when the first webhook is set (luaop.webhook.server starts the server).
function M.new(opts)
  opts = opts or {}
  return setmetatable({ paths = {}, conversions = {}, metrics = {}, account = opts.account, start = opts.start,
    log = logging.logger("webhook") }, Registry)
end

local function what(w)
  return ("webhook.%s of %s"):format(w.kind, w.def.resource)
end

local function key_of(w)
  if w.kind == "conversion" then return "conversion " .. w.group .. "/" .. w.resource_kind end
  return w.path
end

-- true, or nil and why when script's webhooks hooks cannot be served as
-- they are (a path twice, or one another script serves).
function Registry:check(script, hooks)
  local mine = {}
  local at = script ~= "" and script .. ": " or ""
  for _, d in ipairs(hooks) do
    local w = wdef.served(d)
    local key = key_of(w)
    if w.kind ~= "conversion" and w.path == M.CONVERT then
      return nil, ("%s%s: the path %s is the conversions'"):format(at, what(w), M.CONVERT)
    end
    if mine[key] then
      return nil, ("%s%s and %s both serve %s: give one a path = of its own"):format(at, what(mine[key]), what(w),
        w.kind == "conversion" and "the conversion of " .. w.group .. "/" .. w.resource_kind or w.path)
    end
    mine[key] = w
    local other = w.kind == "conversion" and self.conversions[w.group .. "/" .. w.resource_kind] or self.paths[key]
    if other and other.script ~= script then
      return nil, ("%s%s: %s is served by %s already (%s): a path is one script's"):format(at, what(w),
        w.kind == "conversion" and "the conversion of " .. w.group .. "/" .. w.resource_kind or w.path,
        other.script ~= "" and other.script or "the program", what(other.w))
    end
  end
  return true
end

-- The series of a path (kept across reloads; charged to its script).
function Registry:path_metrics(path, script)
  local m = self.metrics[path]
  if m and m.script == script then return m end
  if m then m.owner:drop() end
  local owner = core.metrics.owner("webhook " .. path, 0, self.account and self.account(script) or nil)
  m = { script = script, owner = owner, codes = {}, inflight = 0 }
  m.latency = core.metrics.series("controller_runtime_webhook_latency_seconds", { path }, owner)
  m.in_flight = core.metrics.series("controller_runtime_webhook_requests_in_flight", { path }, owner)
  function m.total(code)
    local s = m.codes[code]
    if not s then
      s = core.metrics.series("controller_runtime_webhook_requests_total", { path, tostring(code) }, owner)
      m.codes[code] = s
    end
    return s
  end
  self.metrics[path] = m
  return m
end

-- Make script's webhooks exactly hooks (checked with :check first).
function Registry:set(script, hooks)
  local ok, err = self:check(script, hooks)
  if not ok then return nil, err end
  for path, e in pairs(self.paths) do
    if e.script == script then self.paths[path] = nil end
  end
  for k, e in pairs(self.conversions) do
    if e.script == script then self.conversions[k] = nil end
  end
  for _, d in ipairs(hooks) do
    local w = wdef.served(d)
    local e = { w = w, script = script }
    if w.kind == "conversion" then
      self.conversions[w.group .. "/" .. w.resource_kind] = e
    else
      self.paths[w.path] = e
    end
  end
  if next(self.conversions) then self.paths[M.CONVERT] = { script = "", conversion = true } end
  for path, m in pairs(self.metrics) do -- a path no longer served: its series go
    local e = self.paths[path]
    if not e or (not e.conversion and e.script ~= m.script) then
      m.owner:drop()
      self.metrics[path] = nil
    end
  end
  if next(self.paths) and self.start and not self.started then
    self.started = true
    self.start(self)
  end
  return true
end

-- Whether any webhook is defined.
function Registry:any()
  return next(self.paths) ~= nil
end

local TEXT = "text/plain; charset=utf-8"
local JSON = "application/json"

-- An answer of text (an error, a refusal).
local function text(status, msg)
  return status, TEXT, msg .. "\n"
end

-- fn(...) in a task of its own under w's budgets, waited for at most
-- w.timeout seconds: true, results... | false, message, why ("error",
-- "deadline", or the budget broken: "instructions", "memory", ...), and
-- for an error the traceback where it was raised.
local function run(w, path, fn, ...)
  local owner = core.task.owner(M.MAX_TASKS)
  local trace
  local task = core.task.spawn_limited({ instructions = w.instructions, memory = w.memory,
    name = "webhook " .. path, owner = owner }, function(...)
      return xpcall(fn, function(e)
        trace = core.traceback(error_text(e), 2)
        return e
      end, ...)
    end, ...)
  local out
  local done = core.task.cond()
  core.task.spawn(function()
    out = table.pack(task:wait())
    done:signal()
  end)
  if not out then done:wait(w.timeout) end
  if not out then
    owner:stop()
    return false, ("the handler did not finish within its deadline of %g s (timeout =)"):format(w.timeout),
      "deadline"
  end
  owner:stop() -- (what it spawned and left ends with it)
  if not out[1] then return false, error_text(out[2]), out[3] or "error" end -- a budget broken
  if not out[2] then return false, error_text(out[3]), "error", trace end
  return true, table.unpack(out, 3, out.n)
end
M.run = run

local function media_type(ctype)
  local m = type(ctype) == "string" and ctype:match("^%s*([^;%s]+)")
  return m and m:lower() or nil
end

-- One request to a known path: status, content type, body.
function Registry:serve(e, method, path, ctype, body)
  if method ~= "POST" then return text(405, ("%s: method %s not allowed: a webhook takes POST"):format(path,
    tostring(method))) end
  if media_type(ctype) ~= JSON then
    return text(415, ("%s: content type %s: a webhook takes application/json"):format(path, tostring(ctype)))
  end
  local t, jerr = json.decode(body or "")
  if t == nil then return text(400, ("%s: the body is not JSON: %s"):format(path, tostring(jerr))) end
  local conversion = path == M.CONVERT
  local rv, why = (conversion and review.conversion or review.admission)(t)
  if not rv then return text(400, ("%s: %s"):format(path, why)) end
  -- (taken before the handler sees the request it is in)
  local head = { apiVersion = rv.apiVersion, kind = rv.kind, uid = rv.request.uid }
  local w, ok, res, kind, trace
  if conversion then
    local first = rv.request.objects[1]
    local c = first and self.conversions[review.group_of(first.apiVersion) .. "/" .. first.kind]
    w = c and c.w or { timeout = wdef.DEFAULT_TIMEOUT, instructions = 1000000, memory = 1024 * 1024 }
    local convs = self.conversions
    ok, res, kind, trace = run(w, path, review.answer, head, review.convert, function(group, k)
      local x = convs[group .. "/" .. k]
      return x and x.w
    end, rv.request)
    if not ok then
      self.log:error("conversion failed", { webhook = path, uid = head.uid, reason = kind, error = trace or res })
      return 200, JSON, json.encode { apiVersion = head.apiVersion, kind = head.kind, response = { uid = head.uid,
        convertedObjects = json.array {}, result = { status = "Failure", message = res:match("^[^\n]*") } } }
    end
  else
    w = e.w
    ok, res, kind, trace = run(w, path, review.answer, head, review.admit, w, rv.request)
    if not ok then
      self.log:error("webhook handler failed: answered 500, the webhook's failurePolicy decides", {
        webhook = path, uid = head.uid, reason = kind, error = trace or res })
      return text(500, ("%s: %s"):format(path, res:match("^[^\n]*")))
    end
  end
  return 200, JSON, res -- (encoded in the handler's task: review.answer)
end

-- Answer one request: status, content type, body.
function Registry:handle(method, path, ctype, body)
  path = type(path) == "string" and path or ""
  local e = self.paths[path]
  if not e then return text(404, ("no webhook is served at %s"):format(path)) end
  local m = self:path_metrics(path, e.script)
  local t0 = core.task.now()
  m.inflight = m.inflight + 1
  m.in_flight:set(m.inflight)
  local ok, status, ctype_out, out = pcall(self.serve, self, e, method, path, ctype, body)
  if not ok then
    self.log:error("webhook request failed", { webhook = path, error = status })
    status, ctype_out, out = text(500, ("%s: %s"):format(path, tostring(status):match("^[^\n]*")))
  end
  m.inflight = m.inflight - 1
  m.in_flight:set(m.inflight)
  m.total(status):add()
  m.latency:observe(core.task.now() - t0)
  return status, ctype_out, out
end

-- The face: luaop.webhook.validating, .mutating, .conversion.
M.face = wdef.face

return M
