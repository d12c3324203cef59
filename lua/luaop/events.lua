-- luaop.events - events.k8s.io/v1 Events, recorded as client-go's
-- tools/events broadcaster records them:
--
--   - the first Event of a key (regarding object, reason, action,
--     reporting controller, type: the note is not part of it) is created;
--   - the second within 6 minutes turns it into a series (series.count 2,
--     one PATCH); later ones only count in memory, and the series is
--     written again at most every 30 minutes (and when luaop stops);
--   - a key not seen for 6 minutes starts over;
--   - and, as client-go's EventCorrelator's spam filter does for core
--     Events, each regarding object may start at most 25 new keys at once,
--     then one every 5 minutes: a reconcile that emits Events in a hot loop
--     cannot flood the API server.
--
-- Recording never waits for the API server and never fails the caller: an
-- Event is written by a task of its own; one the server refuses is logged.
local core = require "luaop.core"
local luaop = require "luaop"

local M = {
  SERIES_WINDOW = 6 * 60,  -- client-go's finishTime: a key ends after 6 idle minutes
  REFRESH = 30 * 60,       -- client-go's refreshTime: a series is written again every 30 minutes
  BURST = 25, REFILL = 5 * 60, -- EventSourceObjectSpamFilter: 25, then one per 5 minutes
  CONTROLLER_BURST = 100, CONTROLLER_REFILL = 1, -- every object of a controller together: 100, then 1/s
  NOTE_MAX = 1024,         -- the API server's limit on note
}

local log = luaop.logger("events")
local keys = {}    -- key -> {event, count, last (task.now), written (task.now), path}
local buckets = {} -- regarding uid (or kind/ns/name), and "controller\0" .. name -> {tokens, at}
local identity     -- reportingInstance
local pending = 0  -- writes under way
local idle = core.task.cond()

local micro_time = luaop.time.format_micro

-- This process, as the reportingInstance of its Events (the identity leader
-- election uses, when given).
function M.set_identity(id) identity = id end

-- Forget every series and bucket (the test kit, between environments: its
-- clock starts over).
function M.reset()
  keys, buckets = {}, {}
end

local function instance()
  if not identity then
    identity = ("luaop_%08x"):format(math.random(0, 0x7fffffff))
  end
  return identity
end

-- A reference to obj (regarding), or nil, err.
local function reference(obj)
  if type(obj) ~= "table" or type(obj.metadata) ~= "table" then return nil, "an Event needs the object it is about" end
  local md = obj.metadata
  if type(obj.kind) ~= "string" or type(obj.apiVersion) ~= "string" or type(md.name) ~= "string" then
    return nil, "an Event's object needs apiVersion, kind and metadata.name"
  end
  return { apiVersion = obj.apiVersion, kind = obj.kind, name = md.name, namespace = md.namespace,
    uid = md.uid, resourceVersion = md.resourceVersion }
end

-- A token bucket: whether id may take a token now.
local function take(id, burst, refill, now)
  local b = buckets[id]
  if not b then
    b = { tokens = burst, at = now }
    buckets[id] = b
  end
  b.tokens = math.min(burst, b.tokens + (now - b.at) / refill)
  b.at = now
  if b.tokens < 1 then return false end
  b.tokens = b.tokens - 1
  return true
end

-- The spam filter: whether the regarding object may start a new key now;
-- and, since a script chooses what an Event regards, its controller too
-- (CONTROLLER_BURST, then one every CONTROLLER_REFILL seconds).
local function allow(ref, controller, now)
  local id = ref.uid or (ref.kind .. "/" .. (ref.namespace or "") .. "/" .. ref.name)
  if not take("controller\0" .. controller, M.CONTROLLER_BURST, M.CONTROLLER_REFILL, now) then return false end
  return take(id, M.BURST, M.REFILL, now)
end

-- Write (in a task of its own): create the Event, or patch its series.
local function write(method, path, body, content_type, what)
  pending = pending + 1
  luaop.spawn(function()
    local status, text = core.api.request { method = method, path = path, body = core.json.encode(body),
      content_type = content_type, timeout = 30 }
    if not status or status >= 300 then
      log:error("cannot record an Event", { reason = what.reason, regarding = what.regarding, status = status,
        error = text })
    end
    pending = pending - 1
    if pending == 0 then idle:signal() end
  end)
end

local function collection(ns) return ("/apis/events.k8s.io/v1/namespaces/%s/events"):format(ns) end

local function write_series(k, now)
  local e = k.event
  k.written = now
  write("PATCH", collection(e.metadata.namespace) .. "/" .. e.metadata.name, {
    series = { count = k.count, lastObservedTime = micro_time(core.task.wall()) },
  }, "application/merge-patch+json", { reason = e.reason, regarding = e.regarding.name })
end

-- Forget keys idle for the series window; write series due a refresh.
local function sweep(now)
  for key, k in pairs(keys) do
    if k.count > k.sent and now - k.written >= M.REFRESH then
      k.sent = k.count
      write_series(k, now)
    end
    if now - k.last >= M.SERIES_WINDOW then keys[key] = nil end
  end
  -- a bucket that would be full again is as good as none
  for id, b in pairs(buckets) do
    if now - b.at >= M.BURST * M.REFILL then buckets[id] = nil end
  end
end

-- record{regarding = obj, type = "Normal"|"Warning", reason = "UpperCamel",
-- note = text, action = "Verb", controller = name}: true, or nil and why
-- the Event is not valid (nothing is written then). Dropped silently (true)
-- when the spam filter says so.
function M.record(e)
  local ref, err = reference(e.regarding)
  if not ref then return nil, err end
  if e.type ~= "Normal" and e.type ~= "Warning" then
    return nil, ("an Event's type is Normal or Warning, not %s"):format(tostring(e.type))
  end
  if type(e.reason) ~= "string" or not e.reason:match("^%u%w*$") or #e.reason > 128 then
    return nil, ("an Event's reason is one UpperCamelCase word, not %s"):format(tostring(e.reason))
  end
  local action = e.action or "Reconcile"
  if type(action) ~= "string" or not action:match("^%u%w*$") or #action > 128 then
    return nil, ("an Event's action is one UpperCamelCase word, not %s"):format(tostring(action))
  end
  local note = e.note and tostring(e.note) or ""
  if #note > M.NOTE_MAX then note = note:sub(1, M.NOTE_MAX - 3) .. "..." end
  local controller = "luaop/" .. tostring(e.controller or "luaop"):gsub("[^%w%-_.]", "-"):sub(1, 63)
  local now = core.task.now()
  sweep(now)
  local key = table.concat({ ref.apiVersion, ref.kind, ref.namespace or "", ref.name, ref.uid or "", e.type,
    e.reason, action, controller }, "\0")
  local k = keys[key]
  if k then
    k.count, k.last = k.count + 1, now
    if k.count == 2 then -- the series starts: written now, later only on refresh
      k.sent = 2
      write_series(k, now)
    end
    return true
  end
  if not allow(ref, controller, now) then return true end
  local ns = ref.namespace or "default"
  local event = {
    apiVersion = "events.k8s.io/v1", kind = "Event",
    metadata = { name = ("%s.%x%06x"):format(ref.name:sub(1, 200), math.floor(core.task.wall()),
      math.random(0, 0xffffff)), namespace = ns },
    eventTime = micro_time(core.task.wall()),
    reportingController = controller, reportingInstance = instance(),
    action = action, reason = e.reason, regarding = ref, note = note, type = e.type,
  }
  keys[key] = { event = event, count = 1, sent = 1, last = now, written = now }
  write("POST", collection(ns), event, "application/json", { reason = e.reason, regarding = ref.name })
  return true
end

-- At the end (after the drain): write every series with counts not yet
-- written, and wait (at most `timeout` seconds) for the writes under way.
function M.flush(timeout)
  for _, k in pairs(keys) do
    if k.count > k.sent then
      k.sent = k.count
      write_series(k, core.task.now())
    end
  end
  local deadline = core.task.now() + (timeout or 5)
  while pending > 0 and core.task.now() < deadline do idle:wait(deadline - core.task.now()) end
end

return M
