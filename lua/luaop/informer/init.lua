-- luaop.informer - stream (or list) then watch one kind (in one namespace,
-- with one selector), keeping a cache of its objects (luaop.informer.cache)
-- and telling handlers what changed, as client-go's reflector and informer do:
--
--   - a streamed sync by default (a WATCH with sendInitialEvents: the state
--     as ADDED events, then the initial-events-end bookmark, the stream
--     going on as the watch: KEP-3157, client-go's WatchListClient); a
--     server that refuses it (422, 400) is listed in pages from then on,
--     then watched from the LIST's resourceVersion;
--   - a watch with bookmarks and a random 5-10 minute timeout, resumed from
--     the last resourceVersion seen when it ends;
--   - one backoff for every relist and rewatch, whatever ended the one
--     before (client-go's: 0.8 s doubling to 30 s, jittered, back to 0.8 s
--     once 2 minutes passed since the last wait began);
--   - a watch that the server or network broke (a transport error, 429)
--     watches again from the last resourceVersion; any other end that is
--     an error (410 Expired/Gone, a Status of any kind in the stream, an
--     HTTP error, a malformed or oversized event) lists again, and a relist
--     turns keys that vanished meanwhile into deletes; each is logged with
--     the informer's kind and counted (luaop_watch_failures_total);
--   - a streamed sync that has not ended its initial events within
--     M.INITIAL_EVENTS_TIMEOUT seconds lists in pages instead;
--   - metadata.managedFields is dropped from cached objects (most of many
--     objects' bytes).
--
-- Cache reads never yield. Handlers run in the informer's task: they must
-- not block (queue work instead).
local core = require "luaop.core"
local time = require "luaop.time"
local logging = require "luaop.logging"
local client = require "luaop.client"
local cache = require "luaop.informer.cache"
local error_text, api_error = client.error_text, client.error
local supervisor = require "luaop.supervisor"
local backoffs = require "luaop.backoff"
local shard = require "luaop.informer.shard"
local list_sync = require "luaop.informer.list"

local M = {}
local Informer = {}
Informer.__index = Informer
for name, f in pairs(cache.methods) do Informer[name] = f end -- the cache's (luaop.informer.cache)

-- client-go's reflector backoff (luaop.backoff): seconds, read at each wait.
M.MIN_BACKOFF, M.MAX_BACKOFF, M.BACKOFF_RESET = 0.8, 30, 120
local SHORT_WATCH = 1 -- seconds: a watch that ended sooner, cleanly, waits before the next
-- Seconds a streamed sync may take to end its initial events (the
-- k8s.io/initial-events-end bookmark) before the informer gives up on it
-- and lists in pages: the API server sends them as fast as it reads its
-- cache, so a stream still short of its end after this is a server or
-- proxy that does not know the protocol, or one stuck.
M.INITIAL_EVENTS_TIMEOUT = 60
-- Seconds a page of a LIST may take (its retries after 429 included):
-- kube-apiserver ends a request at 60 s (--request-timeout), so a page
-- that has not come by then comes from a server or proxy that stalled.
M.LIST_TIMEOUT = 90
-- The timeoutSeconds each watch asks for, at random between these
-- (client-go's reflector: 5 to 10 minutes).
M.WATCH_TIMEOUT = { 300, 600 }

-- The informers' backoff (each informer has its own).
function M.backoff() return backoffs.new(M) end

-- Why a watch or sync ended, as luaop_watch_failures_total's reason (a
-- fixed set: a server's own reasons are not labels).
local function failure_reason(err)
  local reason, code = err.reason, err.code
  if code == 410 or reason == "Expired" or reason == "Gone" then return "Expired" end
  if reason == "MalformedEvent" or reason == "FrameTooLarge" or reason == "NoInitialEventsEnd"
    or reason == "MalformedList" or reason == "MalformedDiscovery" or reason == "Internal" then
    return reason
  end
  if code == 429 then return "TooManyRequests" end
  if code == 0 then return "Transport" end
  return "Status"
end

-- The cache key of an object: "namespace/name", or "name" when cluster-scoped.
M.key, M.most_read = cache.key, cache.most_read
local key = M.key
-- The label indexes a script holds (luaop.informer.cache)
M.indexes_held = cache.indexes_held

-- The informers' metric series (luaop_cache_objects) come from a pool of
-- their own, neither a script's account nor the runtime's reserve: at most
-- M.METRIC_SERIES, each informer's going when it stops.
M.METRIC_SERIES = 1000
local metrics_pool

-- opts: namespace (nil: all namespaces), label_selector, field_selector,
-- metadata_only (each object's metadata alone, as PartialObjectMetadata:
-- luaop.client's list and watch), trim ({drop = {paths}} or {keep =
-- {paths}}: what of each object the cache leaves out, json.cut), client
-- (default luaop.client()), log (a luaop logger).
function M.new(kind, opts)
  opts = opts or {}
  metrics_pool = metrics_pool or core.metrics.owner("the informers", M.METRIC_SERIES)
  local owner = core.metrics.owner("informer " .. kind, 0, metrics_pool)
  local inf = setmetatable({
    kind = kind, opts = opts, client = opts.client or client.default(),
    log = opts.log or logging.logger("informer"):with { kind = kind },
    store = {}, count = 0, indexes = {}, holders = {}, handlers = {}, tombstones = {}, deferred = {},
    dispatch = core.task.cond(),
    wake = core.task.cond(), -- ends a backoff early (stop)
    synced = false, synced_cond = core.task.cond(),
    relists = 0, rv = nil, stopped = false,
    -- luaop_cache_objects (informers of one kind and namespace with other
    -- selectors share it: the last to change sets it)
    metrics_owner = owner,
  }, Informer)
  inf.objects, inf.objects_refused = core.metrics.series("luaop_cache_objects", { kind, opts.namespace or "" },
    owner)
  -- (a metadata-only cache keeps metadata alone: its apiVersion and kind
  -- are put back as it is read)
  if opts.trim or opts.metadata_only then inf.cut = core.json.cut(opts.metadata_only and { metadata_only = true }
    or opts.trim) end
  return inf
end

-- luaop_informer_relists_total and luaop_watch_failures_total: rare, so
-- the series is found each time (shared with informers of the same kind
-- and namespace, and made again when the one that made it stopped).
function Informer:relisted()
  core.metrics.series("luaop_informer_relists_total", { self.kind, self.opts.namespace or "" },
    self.metrics_owner):add()
end

function Informer:failed(reason)
  core.metrics.series("luaop_watch_failures_total", { self.kind, self.opts.namespace or "", reason },
    self.metrics_owner):add()
end

-- handlers: {add = f(obj), update = f(old, new), delete = f(obj)}; several
-- may be added. A handler that raises is logged and the others still run.
function Informer:on(handlers)
  self.handlers[#self.handlers + 1] = handlers
end

function Informer:emit(event, a, b, defer)
  if defer then
    self.deferred[#self.deferred + 1] = { event, a, b }
    self.dispatch:signal()
    return
  end
  for _, h in ipairs(self.handlers) do
    local f = h[event]
    if f then
      local ok, err = pcall(f, a, b)
      if not ok then self.log:error("event handler failed", { event = event, error = error_text(err) }) end
    end
  end
end

-- LIST everything and make the cache what it says: new objects are adds,
-- changed ones updates, and those that vanished deletes. true | nil, err.
-- While informers list, the collector runs in generational mode: a page's
-- JSON text and what decoding left behind die young and go in the next
-- minor collection, which comes as the heap grows a fifth, instead of
-- piling up to twice the cache's size before an incremental cycle ends.
-- (No minor collection is asked for besides: each one traverses the whole
-- store, an old table a sync writes into, so one every page made a sync's
-- time grow with the square of its objects: 22.7 s for 300k ConfigMaps.)
local listing = 0
-- How many informers list or stream their state now (luaop.collector
-- leaves the collector alone meanwhile: generational mode ends no cycle).
function M.listing() return listing end

-- Whether syncs switch the collector's mode (luaop's runtime). The test kit
-- turns it off: its syncs are a few objects, and each switch to
-- generational mode is a full collection of the process's heap.
M.GC_MODES = true
-- (and no pages given back meanwhile: src/gcmem.h, a tenth of a sync's CPU)
local function gc_listing(delta)
  listing = listing + delta
  if listing == (delta > 0 and 1 or 0) then core.gcmem_hold(delta > 0) end
  if M.GC_MODES and delta > 0 and listing == 1 then collectgarbage("generational") end
  if delta < 0 and listing == 0 then collectgarbage("incremental") end
end

function Informer:relist()
  local seen = {}
  self.tombstones = {} -- the LIST is the truth
  gc_listing(1)
  local ok, rv, err = pcall(list_sync.sync, self, M, seen) -- (luaop.informer.list)
  gc_listing(-1)
  if not ok then return nil, tostring(rv) end
  if not rv then return nil, err end
  self:synced_from(seen, rv)
  return true
end

-- One event of a running watch into the cache (a BOOKMARK: only its
-- resourceVersion); text: the object's, as the cache keeps it (json.event).
function Informer:apply(typ, obj, text)
  local rv = obj.metadata and obj.metadata.resourceVersion
  if rv then
    -- (the watch resumes from the newest seen: an event a broken proxy
    -- sent late does not move it back)
    local new, cur = math.tointeger(tonumber(rv)), math.tointeger(tonumber(self.rv))
    if not (new and cur and new < cur) then self.rv = rv end
  end
  if typ == "ADDED" or typ == "MODIFIED" then
    -- no older state of an object over a newer one: an event twice, or
    -- two out of order (the API server sends neither; a proxy might)
    local k = key(obj)
    if k and self.store[k] and self:stale(k, obj) then return end
    self:upsert(obj, nil, text)
  elseif typ == "DELETED" then
    self:remove(obj)
  end
end

-- A watch of this informer's kind and selectors, with `extra` options
-- added (a random 5-10 minute timeout, bookmarks): the watch | nil, err |
-- nil when the informer stopped meanwhile.
function Informer:open_watch(extra)
  local o = self.opts
  local q = {
    namespace = o.namespace, all_namespaces = o.namespace == nil,
    label_selector = o.label_selector, field_selector = o.field_selector, shard_selector = shard.query(self),
    shard = shard.filter(self), metadata_only = o.metadata_only, cut = self.cut,
    timeout = math.random(M.WATCH_TIMEOUT[1], M.WATCH_TIMEOUT[2]), bookmarks = true, shallow = true,
  }
  for k, v in pairs(extra) do q[k] = v end
  local w, err = self.client:watch(self.kind, q)
  if not w then return nil, err end
  if self.stopped then -- stopped while the watch was being set up
    w:close()
    return nil
  end
  self.watching = w
  self.watch_started = true
  return w
end

-- One watch from self.rv until it ends. Returns its error, if any.
function Informer:watch_once()
  local w, err = self:open_watch { resource_version = self.rv }
  if not w then return err end
  for typ, obj, text in w:events() do self:apply(typ, obj, text) end
  w:close()
  self.watching = nil
  return w.err
end

-- Whether the informer's first sync and its relists stream (see
-- watch_list); false: LISTs only (benchmarks compare the two), each read
-- as it arrives with LIST_STREAM, else in pages (luaop.informer.list).
M.STREAM = true
M.LIST_STREAM = false

-- The end of a sync, LIST or stream: what was not seen is gone.
function Informer:synced_from(seen, rv)
  self.relists = self.relists + 1
  for k, old in pairs(self.store) do
    if not seen[k] then self:remove(core.json.decode(old)) end
  end
  self.rv = rv
  if not self.synced then
    self.synced = true
    self.synced_cond:signal()
    if self.on_state then self.on_state() end
  end
end

-- The streaming list (client-go's WatchListClient, KEP-3157): one watch
-- with sendInitialEvents=true sends the state as ADDED events, one object
-- at a time (no page of 500 decoded at once: the sync's peak memory stays
-- near the cache's), then a BOOKMARK annotated k8s.io/initial-events-end,
-- and goes on as the watch. Returns synced (the end was seen), err.
function Informer:watch_list()
  local w, err = self:open_watch { send_initial_events = true, resource_version_match = "NotOlderThan" }
  if not w then return false, err end
  local seen, initial = {}, true
  self.tombstones = {} -- the stream is the truth
  -- an event before the end of the initial ones
  local function initial_event(typ, obj, text)
    local k = key(obj)
    if typ == "ADDED" or typ == "MODIFIED" then
      if k then seen[k] = true end
      self:upsert(obj, nil, text)
    elseif typ == "DELETED" then
      if k then seen[k] = nil end
      self:remove(obj)
    elseif typ == "BOOKMARK" then
      local md = obj.metadata or {}
      if md.annotations and md.annotations["k8s.io/initial-events-end"] == "true" then
        initial = false
        gc_listing(-1)
        self:synced_from(seen, md.resourceVersion)
      end
    end
  end
  gc_listing(1)
  -- a stream that has not ended its initial events in time is given up
  local timed_out, finished, over = false, false, core.task.cond()
  core.task.spawn(function()
    if not finished then over:wait(M.INITIAL_EVENTS_TIMEOUT) end -- (a task starts later: it may be over)
    if initial and not finished and self.watching == w then
      timed_out = true
      w:close()
    end
  end)
  local ok, perr = pcall(function()
    for typ, obj, text in w:events() do
      if initial then initial_event(typ, obj, text) else self:apply(typ, obj, text) end
    end
  end)
  finished = true
  over:signal()
  -- (whatever happened, the collector leaves generational mode with it)
  if initial then gc_listing(-1) end
  w:close()
  self.watching = nil
  if not ok then return not initial, api_error(0, "the watch failed: " .. tostring(perr)) end
  if initial and (timed_out or not w.err) and not self.stopped then
    local e = api_error(0, timed_out and
      ("the stream had not ended its initial events (the k8s.io/initial-events-end bookmark) after %g s")
        :format(M.INITIAL_EVENTS_TIMEOUT) or
      "the watch ended before the end of its initial events (no k8s.io/initial-events-end bookmark)")
    e.reason = "NoInitialEventsEnd"
    return false, e
  end
  return not initial, w.err
end

-- Whether a failed stream means paged LISTs: "always" where the server
-- refuses the parameters (a WatchList feature gate off: 422 Invalid, or
-- 400), "now" for this sync only for any other failure before the end of
-- its initial events (client-go's reflector too falls back to a LIST then:
-- progress is better than a deadlock): Forbidden (an admission rule, RBAC
-- mid-change), no end bookmark (a server that does not know the protocol,
-- one shutting down, one stuck), a 410, a Status in the stream, a reset.
local function no_stream(err)
  if err.code == 400 or err.code == 422 then return "always" end
  return "now"
end

-- Whether the watch that ended with err is to be resumed from its
-- resourceVersion (the network or an overloaded server broke it: what the
-- cache holds is still true up to there) rather than listed again.
local function rewatch(err)
  return err.code == 429 or (err.code == 0 and (err.reason == "TransportError" or err.reason == "Timeout"))
end

-- self:method(...)'s results; when it raises (an answer of a shape no
-- check knew, a bug of luaop's), nil and an error of reason "Internal"
-- with its traceback, its watch closed: a list/watch failure like any
-- other (logged, counted, listed again after the backoff), not the death
-- of the informer's task.
local function guarded(self, method, ...)
  local r = table.pack(xpcall(self[method], function(e)
    return core.traceback(client.error_text(e), 2)
  end, self, ...))
  if r[1] then return table.unpack(r, 2, r.n) end
  if self.watching then
    self.watching:close()
    self.watching = nil
  end
  local err = client.error(0, "the informer failed: " .. r[2])
  err.reason = "Internal"
  return nil, err
end

-- Run until stopped; call it in a task of its own (luaop.spawn). An
-- informer that has listed already resumes watching from where it was.
function Informer:run()
  local backoff = M.backoff()
  local need_list = self.rv == nil
  local list_now = false -- the next sync by LIST, a stream having just failed
  if self.stream == nil then self.stream = M.STREAM end
  while not self.stopped do
    local err
    self.watch_started = false
    local began = time.monotonic()
    if self.relist_wanted then need_list, self.relist_wanted = true, false end -- (its ranges grew)
    self.shard_moved = false -- (its ranges changed: the watch ended on purpose, no pause)
    if need_list and self.shard then shard.before_sync(self) end -- (may find it is to be whole)
    if need_list and self.relists > 0 then self:relisted() end
    if need_list and self.stream and not list_now then
      local synced
      synced, err = guarded(self, "watch_list")
      if synced then need_list = false end
      -- its ranges changed mid-stream (luaop.informer.shard closed it on
      -- purpose): streamed again with the new selector, not a failure
      if self.shard_moved and not synced and not self.stopped then err = nil end
      local fallback = err and not synced and no_stream(err)
      if fallback == "now" then self:failed(failure_reason(err)) end
      if fallback == "always" then
        self.log:info("the API server does not stream lists (sendInitialEvents): listing in pages instead",
          { error = tostring(err) })
        self.stream, err = false, nil
      elseif fallback == "now" then
        self.log:info("streaming the list failed: listing in pages this time", { error = tostring(err) })
        list_now, err = true, nil
      end
    else
      if need_list then
        local ok
        ok, err = guarded(self, "relist")
        need_list = not ok
        if ok then list_now = false end
      end
      -- (its ranges grew while it listed in pages: listed again first)
      if not err and not self.stopped and not self.relist_wanted then
        local ended, failed = guarded(self, "watch_once") -- (its error | nil, a raise's)
        err = failed or ended
      end
    end
    if self.shard_moved and not self.stopped then err = nil end -- (closed on purpose: luaop.informer.shard)
    if err and not self.stopped then
      local reason = failure_reason(err)
      self:failed(reason)
      local wait = backoff:next(time.monotonic())
      -- anything but a broken connection or an overloaded server: what
      -- the cache holds may miss what the failed watch had to say (and a
      -- LIST that failed is still to be made)
      if not rewatch(err) then need_list = true end
      if reason == "Expired" then
        self.log:info("resourceVersion too old, listing again",
          { resourceVersion = self.rv, error = tostring(err), retryIn = wait })
      else
        self.log:error(need_list and "list/watch failed, listing again" or "list/watch failed, watching again",
          { error = tostring(err), reason = reason, retryIn = wait })
      end
      self:pause(wait)
    elseif not err and self.watch_started and not need_list and not self.stopped and not self.relist_wanted
      and time.monotonic() - began < SHORT_WATCH and not self.shard_moved then
      -- a watch the server ended at once, cleanly (a proxy's short
      -- timeout, a broken server): the next one not at once either, or
      -- this would be a loop of requests as fast as the server answers
      -- (the client has no rate limit by default)
      self:pause(backoff:next(time.monotonic()))
    end
  end
end

-- Wait seconds, or until stopped.
function Informer:pause(seconds)
  if not self.stopped then self.wake:wait(seconds) end
end

-- Start run() in a task, supervised (luaop.supervisor: a death is logged,
-- counted and restarted after a backoff, resuming from the last
-- resourceVersion; meanwhile self.dead is true, and self.on_state, when
-- set, is told of each change); returns the informer.
function Informer:start()
  local function done() return self.stopped end
  local function state(dead)
    return function()
      self.dead = dead
      if self.on_state then self.on_state() end
    end
  end
  self.task = supervisor.spawn("informer", { name = self.kind, done = done, on_death = state(true),
    on_restart = state(false) }, self.run, self)
  -- the dispatcher of deferred events (this process's own writes)
  supervisor.spawn("dispatcher", { name = self.kind, done = done }, function()
    while not self.stopped do
      if #self.deferred == 0 then self.dispatch:wait() end
      local events = self.deferred
      self.deferred = {}
      for _, e in ipairs(events) do
        if not self.stopped then self:emit(e[1], e[2], e[3]) end
      end
    end
  end)
  return self
end

-- Yield until the first LIST is in the cache (or the informer stopped).
function Informer:wait_synced()
  if not self.synced and not self.stopped then self.synced_cond:wait() end
  return self.synced
end

function Informer:stop()
  self.stopped = true
  self.metrics_owner:drop()
  for name, hs in pairs(self.holders) do -- its indexes go with it
    for h in pairs(hs) do self:release_index(name, h) end
  end
  self.dispatch:signal()
  self.wake:signal()
  if self.watching then self.watching:close() end
  self.synced_cond:signal() -- nobody waits for a cache that will not come
end

return M
