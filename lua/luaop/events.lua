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
-- What this keeps is owned by the controller that records (docs/security.md,
-- "Shared resources"): each controller has its keys, its buckets (one per
-- object it regards, and its own) and a heap of when each is next due (to
-- expire, or to have its series written again), at most MAX_KEYS keys and
-- MAX_BUCKETS buckets; a record looks at no more than SWEEP entries of its
-- own controller's heap, so what it costs never depends on what other
-- controllers recorded. The controllers of one script together keep at
-- most SCRIPT_KEYS keys and SCRIPT_BUCKETS buckets (record's `script`).
-- A controller's state goes when it stops (forget).
--
-- Recording never waits for the API server and never fails the caller: an
-- Event is written by a task of its own; one the server refuses is logged.
local core = require "luaop.core"
local time = require "luaop.time"
local logging = require "luaop.logging"

local M = {
  SERIES_WINDOW = 6 * 60,  -- client-go's finishTime: a key ends after 6 idle minutes
  REFRESH = 30 * 60,       -- client-go's refreshTime: a series is written again every 30 minutes
  BURST = 25, REFILL = 5 * 60, -- EventSourceObjectSpamFilter: 25, then one per 5 minutes
  CONTROLLER_BURST = 100, CONTROLLER_REFILL = 1, -- every object of a controller together: 100, then 1/s
  NOTE_MAX = 1024,         -- the API server's limit on note
  MAX_KEYS = 1024,         -- keys (series) one controller keeps; Events of new ones beyond are dropped
  MAX_BUCKETS = 1024,      -- objects' buckets one controller keeps; likewise
  SCRIPT_KEYS = 4096, SCRIPT_BUCKETS = 4096, -- and all the controllers of one script together
  SWEEP = 8,               -- due entries of its heap one record looks at, at most
}

local log = logging.logger("events")
local states = {}  -- controller name -> its state (state())
local scripts = {} -- script -> {nkeys, nbuckets} of its controllers together
local identity     -- reportingInstance
local pending = 0  -- writes under way
local idle = core.task.cond()
local visited = 0  -- heap entries looked at, in all (M.stats)

local micro_time = time.format_micro

-- This process, as the reportingInstance of its Events (the identity leader
-- election uses, when given).
function M.set_identity(id) identity = id end

-- Forget every series and bucket (the test kit, between environments: its
-- clock starts over).
function M.reset()
  states, scripts = {}, {}
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

-- ---- a heap of due times, one per controller ---------------------------------
-- entries {due, what, id, obj}: obj the key's or bucket's table, so an
-- entry whose key went (or was replaced) is known stale when it comes up

local function heap_push(h, e)
  local i = #h + 1
  h[i] = e
  while i > 1 do
    local p = i // 2
    if h[p][1] <= e[1] then break end
    h[i], h[p] = h[p], e
    i = p
  end
end

local function heap_pop(h)
  local top, n = h[1], #h
  local last = h[n]
  h[n] = nil
  n = n - 1
  if n > 0 then
    local i = 1
    while true do
      local l, r, m = 2 * i, 2 * i + 1, i
      if l <= n and h[l][1] < (m == i and last or h[m])[1] then m = l end
      if r <= n and h[r][1] < (m == i and last or h[m])[1] then m = r end
      if m == i then break end
      h[i] = h[m]
      i = m
    end
    h[i] = last
  end
  return top
end

-- The state of a controller, made on its first Event; charged to its
-- script (the one it first recorded for).
local function state(controller, script, stopped)
  local st = states[controller]
  if not st and stopped then
    -- a stopped controller's reconcile, still running: state of its own
    -- for this Event alone, kept by nobody (forget has run for it)
    return { keys = {}, nkeys = 0, buckets = {}, nbuckets = 0, heap = {}, sc = { nkeys = 0, nbuckets = 0 } }
  end
  if not st then
    script = type(script) == "string" and script or ""
    local sc = scripts[script]
    if not sc then
      sc = { nkeys = 0, nbuckets = 0 }
      scripts[script] = sc
    end
    st = { keys = {}, nkeys = 0, buckets = {}, nbuckets = 0, heap = {}, own = nil, sc = sc }
    states[controller] = st
  end
  return st
end

-- One key or bucket more (delta 1) or less (-1) for st and its script.
local function count(st, field, delta)
  st[field] = st[field] + delta
  st.sc[field] = st.sc[field] + delta
end

-- A token bucket (b, or a new one when nil): whether it may take a token
-- now, and the bucket.
local function take(b, burst, refill, now)
  b = b or { tokens = burst, at = now }
  b.tokens = math.min(burst, b.tokens + (now - b.at) / refill)
  b.at = now
  if b.tokens < 1 then return false, b end
  b.tokens = b.tokens - 1
  return true, b
end

-- When an object's bucket is full again (as good as none).
local function bucket_due(b) return b.at + (M.BURST - b.tokens) * M.REFILL end

-- The spam filter: whether the regarding object may start a new key now;
-- and, since a script chooses what an Event regards, its controller too
-- (CONTROLLER_BURST, then one every CONTROLLER_REFILL seconds). Buckets
-- are the controller's: one controller's Events never use up another's.
local function allow(st, ref, now)
  local id = ref.uid or (ref.kind .. "/" .. (ref.namespace or "") .. "/" .. ref.name)
  local ok
  ok, st.own = take(st.own, M.CONTROLLER_BURST, M.CONTROLLER_REFILL, now)
  if not ok then return false end
  local b = st.buckets[id]
  if not b then
    if st.nbuckets >= M.MAX_BUCKETS or st.sc.nbuckets >= M.SCRIPT_BUCKETS then return false end
    count(st, "nbuckets", 1)
  end
  ok, b = take(b, M.BURST, M.REFILL, now)
  if not st.buckets[id] then
    st.buckets[id] = b
    heap_push(st.heap, { bucket_due(b), "bucket", id, b })
  end
  return ok
end

local function collection(ns) return ("/apis/events.k8s.io/v1/namespaces/%s/events"):format(ns) end

local write_series

-- Write (in a task of its own): create the Event, or patch its series.
-- event: for a patch of its series, the Event to create again, with the
-- series, when the patch finds none (its create never arrived: an answer
-- lost, a reset; client-go's recordToSink does the same). k: its key,
-- whose writes go one at a time, in order (as client-go's one goroutine
-- sends them): a series written while the create is on its way would find
-- no Event, create it again and be refused (AlreadyExists); it waits, and
-- goes, with the count of then, when the write before it is answered.
local function write(method, path, body, content_type, what, event, k)
  pending = pending + 1
  k.writing = true
  core.task.spawn(function()
    local status, text = core.api.request { method = method, path = path, body = core.json.encode(body),
      content_type = content_type, timeout = 30 }
    if status == 404 and event then
      local whole = {}
      for f, v in pairs(event) do whole[f] = v end
      whole.series = body.series
      status, text = core.api.request { method = "POST", path = collection(event.metadata.namespace),
        body = core.json.encode(whole), content_type = "application/json", timeout = 30 }
    end
    if not status or status >= 300 then
      log:error("cannot record an Event", { reason = what.reason, regarding = what.regarding, status = status,
        error = text })
    end
    k.writing = nil
    if k.waiting then
      k.waiting = nil
      write_series(k, core.task.now())
    end
    pending = pending - 1
    if pending == 0 then idle:signal() end
  end)
end

function write_series(k, now)
  if k.writing then
    k.waiting = true
    return
  end
  local e = k.event
  k.written, k.sent = now, k.count
  write("PATCH", collection(e.metadata.namespace) .. "/" .. e.metadata.name, {
    series = { count = k.count, lastObservedTime = micro_time(core.task.wall()) },
  }, "application/merge-patch+json", { reason = e.reason, regarding = e.regarding.name }, e, k)
end

-- k's count, when it grew since it was last written.
local function flush_key(k, now)
  if k.count > k.sent then write_series(k, now) end
end

-- k (of st, under id) ends: its last count written, its entry gone.
local function end_key(st, id, k, now)
  flush_key(k, now)
  st.keys[id] = nil
  count(st, "nkeys", -1)
end

-- When key k is next due: its end, or the refresh of a series with counts
-- not yet written, whichever comes first.
local function key_due(k)
  local due = k.last + M.SERIES_WINDOW
  if k.count > k.sent then due = math.min(due, k.written + M.REFRESH) end
  return due
end

-- At most M.SWEEP due entries of st's heap: keys idle for the series
-- window end (with their last count written, as client-go's finishSeries
-- does), series due a refresh are written, buckets full again go. An
-- entry that is not due after all (its key was seen since) goes back in
-- at its new time.
local function sweep(st, now)
  local h = st.heap
  for _ = 1, M.SWEEP do
    local e = h[1]
    if not e or e[1] > now then return end
    heap_pop(h)
    visited = visited + 1
    local what, id, obj = e[2], e[3], e[4]
    if what == "key" and st.keys[id] == obj then
      local k = obj
      if now - k.last >= M.SERIES_WINDOW then
        end_key(st, id, k, now)
      else
        if now - k.written >= M.REFRESH then flush_key(k, now) end
        heap_push(h, { key_due(k), "key", id, k })
      end
    elseif what == "bucket" and st.buckets[id] == obj then
      local due = bucket_due(obj)
      if now >= due then
        st.buckets[id] = nil
        count(st, "nbuckets", -1)
      else
        heap_push(h, { due, "bucket", id, obj })
      end
    end
  end
end

-- record{regarding = obj, type = "Normal"|"Warning", reason = "UpperCamel",
-- note = text, action = "Verb", controller = name, script = path, stopped = whether that
-- controller has stopped (a reconcile of it still running)}: true, or nil and why
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
  local owner = tostring(e.controller or "luaop")
  local controller = "luaop/" .. owner:gsub("[^%w%-_.]", "-"):sub(1, 63)
  local now = core.task.now()
  local st = state(owner, e.script, e.stopped)
  sweep(st, now)
  local key = table.concat({ ref.apiVersion, ref.kind, ref.namespace or "", ref.name, ref.uid or "", e.type,
    e.reason, action }, "\0")
  local k = st.keys[key]
  if k and now - k.last >= M.SERIES_WINDOW then -- ended, not swept yet: ends now
    end_key(st, key, k, now)
    k = nil
  end
  if k then
    k.count, k.last = k.count + 1, now
    if k.count == 2 then write_series(k, now) end -- the series starts: written now, later only on refresh
    return true
  end
  if st.nkeys >= M.MAX_KEYS or st.sc.nkeys >= M.SCRIPT_KEYS then -- at a cap: as the spam filter, dropped
    if not st.full then
      st.full = true
      log:info("a controller (or its script) keeps as many Event series as it may: new ones are dropped until "
        .. "some end", { controller = owner, keys = st.nkeys, scriptKeys = st.sc.nkeys })
    end
    return true
  end
  st.full = nil
  if not allow(st, ref, now) then return true end
  local ns = ref.namespace or "default"
  local event = {
    apiVersion = "events.k8s.io/v1", kind = "Event",
    metadata = { name = ("%s.%x%06x"):format(ref.name:sub(1, 200), math.floor(core.task.wall()),
      math.random(0, 0xffffff)), namespace = ns },
    eventTime = micro_time(core.task.wall()),
    reportingController = controller, reportingInstance = instance(),
    action = action, reason = e.reason, regarding = ref, note = note, type = e.type,
  }
  k = { event = event, count = 1, sent = 1, last = now, written = now }
  st.keys[key] = k
  count(st, "nkeys", 1)
  heap_push(st.heap, { key_due(k), "key", key, k })
  write("POST", collection(ns), event, "application/json", { reason = e.reason, regarding = ref.name }, nil, k)
  return true
end

-- Write the series of st with counts not yet written.
local function flush_state(st)
  for _, k in pairs(st.keys) do flush_key(k, core.task.now()) end
end

-- A controller stopped: its series' last counts are written, and what
-- was kept for it goes.
function M.forget(controller)
  local st = states[controller]
  if not st then return end
  flush_state(st)
  st.sc.nkeys, st.sc.nbuckets = st.sc.nkeys - st.nkeys, st.sc.nbuckets - st.nbuckets
  states[controller] = nil
end

-- What is kept for a controller (nil: nothing), and the heap entries
-- looked at by every record so far; with script, what its controllers keep.
function M.stats(controller, script)
  local st = states[controller]
  local sc = script and scripts[script]
  return st and { keys = st.nkeys, buckets = st.nbuckets, heap = #st.heap } or nil, visited,
    sc and { keys = sc.nkeys, buckets = sc.nbuckets } or nil
end

-- At the end (after the drain): write every series with counts not yet
-- written, and wait (at most `timeout` seconds) for the writes under way.
function M.flush(timeout)
  for _, st in pairs(states) do flush_state(st) end
  local deadline = core.task.now() + (timeout or 5)
  while pending > 0 and core.task.now() < deadline do idle:wait(deadline - core.task.now()) end
end

return M
