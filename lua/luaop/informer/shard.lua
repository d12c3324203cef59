-- luaop.informer.shard - an informer that keeps only the objects of the
-- ranges of the hash space its replica holds or is about to (luaop.shard),
-- by metadata.namespace: asked of the API server as a shardSelector
-- (KEP-5866) where it applies one, filtered here where it does not.
--
-- Whether the server applies it is learnt per informer from a LIST of one
-- item with the selector (the server echoes what it applied in
-- metadata.shardInfo on LISTs only, not on watches or streamed syncs):
-- "server" then, and the selector goes with every LIST and WATCH; else
-- "client": nothing is sent, and every object is hashed as it arrives
-- (Informer.keep) and kept only when in range. Either way an object out of
-- range never stays in the cache (a server that filters wrongly is caught
-- too). When the ranges change, a wider set lists again (with the new
-- selector: what is still held stays, unchanged objects are no events),
-- and a narrower one drops what left it at once and watches on with the
-- narrower selector.
local core = require "luaop.core"
local ranges = require "luaop.shard.ranges"

local M = {}

M.FIELD = "object.metadata.namespace"

-- Make inf a sharded informer; its ranges come with M.set (until then its
-- first sync waits for them). owner: a list of kinds, sharded only when
-- every one is namespaced, which its first sync learns: for an owned kind's
-- informer, its owner's kind (an owner's children share its namespace) and
-- its own; for a watched kind's, the controller's resource and the kind
-- (a key of a cluster-scoped resource is in no namespace, and a
-- cluster-scoped object maps to keys of any).
function M.attach(inf, owner)
  local s = { set = nil, known = core.task.cond(), owner = owner }
  inf.shard = s
  inf.keep = function(obj)
    local set = s.set
    if not set then return false end
    local md = obj.metadata
    return ranges.contains(set, core.shard.hash(type(md.namespace) == "string" and md.namespace or ""))
  end
end

-- At most this many ranges in a selector: the API server parses it as CEL
-- (at most 100,000 characters); a set of more is asked as a superset (the
-- smallest gaps filled in), the rest dropped here (Informer.keep).
M.MAX_RANGES = 256

-- The shardSelector to send: in server mode, the set's (nil for all of it).
function M.query(inf)
  local s = inf.shard
  if not s or s.mode ~= "server" or not s.set then return nil end
  return ranges.selector(ranges.coarsen(s.set, M.MAX_RANGES), M.FIELD)
end

local function mode_metric(inf, mode)
  for _, m in ipairs { "server", "client" } do
    core.metrics.series("luaop_shard_informer_mode", { inf.kind, inf.opts.namespace or "", m }, inf.metrics_owner)
      :set(m == mode and 1 or 0)
  end
end

-- The ranges to filter by in C, before decoding (client:list and
-- client:watch's opts.shard), when the server does not (client mode, or a
-- mode not learnt yet); nil when it does. The set a watch was opened with
-- may be wider than the one held later (a narrower set drops at once, and
-- the watch goes on): Informer.keep judges what passes.
function M.filter(inf)
  local s = inf.shard
  if s and s.mode ~= "server" and s.set then return s.set end
  return nil
end

-- Before a sync: wait for the ranges, then learn (once) whether the server
-- applies the selector. An empty set: nothing to ask the server for (it
-- refuses an empty selector), every object dropped here.
function M.before_sync(inf)
  local s = inf.shard
  if s.owner then
    for _, kind in ipairs(s.owner) do
      local r = inf.client:resolve(kind)
      if not r then return end -- (not known yet: asked again at the next sync)
      if not r.namespaced then
        -- a cluster-scoped owner's children are in every namespace, and so
        -- are the keys a cluster-scoped object maps to: whole
        inf.shard, inf.keep = nil, nil
        return
      end
    end
    s.owner = nil
  end
  while not s.set and not inf.stopped do s.known:wait() end
  if inf.stopped or s.mode or #s.set == 0 then return end
  local probe = ranges.selector(ranges.coarsen(s.set, M.MAX_RANGES), M.FIELD)
    or ranges.selector({ { 0, 0x7fffffffffffffff } }, M.FIELD)
  local o = inf.opts
  local list, err = inf.client:first_page(inf.kind, { namespace = o.namespace, all_namespaces = o.namespace == nil,
    label_selector = o.label_selector, field_selector = o.field_selector, shard_selector = probe, timeout = 30 })
  if not list then
    -- (a failed probe decides nothing: client mode this time, asked again at the next sync)
    inf.log:info("could not ask the API server whether it shards lists: filtering here", { error = tostring(err) })
    return
  end
  local info = type(list.metadata) == "table" and list.metadata.shardInfo
  local applied = type(info) == "table" and ranges.parse_selector(info.selector)
  s.mode = applied and "server" or "client"
  inf.log:info(s.mode == "server" and "the API server shards this list and watch (shardSelector)"
    or "the API server does not shard this list (no shardInfo): filtering here", { mode = s.mode })
  mode_metric(inf, s.mode)
end

-- The ranges the informer is to hold now.
function M.set(inf, set)
  local s = inf.shard
  if not s then return end -- (an owned kind's, found whole)
  local old = s.set
  if old and ranges.equal(old, set) then return end
  s.set = set
  s.known:signal()
  if not old then return end -- (the first: the first sync waited for it)
  -- (synced or not: a change in the middle of a sync is no different, the
  -- sync under way asked for the old set)
  if #ranges.subtract(set, old) > 0 then
    -- wider: what it did not keep is listed again
    inf.relist_wanted = true
  else
    -- narrower: what left goes now
    for _, obj in inf:each() do
      if not inf.keep(obj) then inf:remove(obj) end
    end
  end
  -- and the watch (or the stream of a sync) starts again with the new
  -- selector (server mode), from where it was
  if inf.watching and (s.mode == "server" or inf.relist_wanted) then
    inf.shard_moved = true
    inf.watching:close()
  end
end

return M
