-- luaop.shard - sharded controllers (docs/sharding.md): with --shard-ring,
-- each replica reconciles only the keys whose hash is in the ranges it
-- holds in the ring (luaop.shard.member), by the key's namespace or its
-- object's uid (the definition's shard_by), the 64-bit FNV-1a hash the API
-- server's shardSelector uses.
--
-- The manager's hooks: a worker asks ours(c, key) of each key it takes
-- (a key not held is dropped, counted in luaop_shard_keys_dropped_total)
-- and runs the reconcile in a task marked with the key's hash (the fence
-- lets that task's writes out only while the hash is held); releasing a
-- range waits for the reconciles of its keys (drain); acquiring one queues
-- its keys again (gained).
local core = require "luaop.core"
local supervisor = require "luaop.supervisor"
local ranges = require "luaop.shard.ranges"
local member = require "luaop.shard.member"
local plan = require "luaop.plan"
local shard_informer = require "luaop.informer.shard"
local informer = require "luaop.informer"

local M = {}
local Shard = {}
Shard.__index = Shard

M.DEFAULT_BY = "namespace"

-- The hash of key for controller c, or nil when it cannot be known (by
-- uid, an object neither cached nor seen).
function Shard:hash(c, key)
  local by = c.def.shard_by or M.DEFAULT_BY
  -- "none": every key at one point, the one cluster-scoped keys have: the
  -- controller runs on one replica at a time, as under a leader
  if by == "none" then return core.shard.hash("") end
  if by == "namespace" then
    local ns = plan.split_key(key)
    return core.shard.hash(ns or "")
  end
  local uid = c.primary and c.primary.inf:uid(key) or (c.shard_uids and c.shard_uids[key])
  if type(uid) ~= "string" then return nil end
  return core.shard.hash(uid)
end

-- Whether this replica takes key for c now; its hash too.
function Shard:ours(c, key)
  local h = self:hash(c, key)
  if h and self.member:serves(h) then return true, h end
  c.shard_dropped = c.shard_dropped or core.metrics.series("luaop_shard_keys_dropped_total", { c.name })
  c.shard_dropped:add()
  return false
end

-- Every reconcile running now whose key's hash is in set.
local function running_in(self, set)
  local n = 0
  for _, c in pairs(self.manager.controllers) do
    for _, h in pairs(c.shard_active or {}) do
      if ranges.contains(set, h) then n = n + 1 end
    end
  end
  for _, c in ipairs(self.manager.retired) do
    for _, h in pairs(c.shard_active or {}) do
      if ranges.contains(set, h) then n = n + 1 end
    end
  end
  return n
end

function Shard:drain(set, deadline)
  while true do
    local n = running_in(self, set)
    if n == 0 then return true end
    local left = deadline - core.task.now()
    if left <= 0 then
      self.member.log:error("reconciles still running for released ranges at the drain's end: their writes are fenced",
        { running = n })
      return false
    end
    self.manager.idle:wait(left)
  end
end

-- Keys of the ranges just acquired, queued again (dropped while another
-- replica held them).
function Shard:gained(set)
  for _, c in pairs(self.manager.controllers) do
    if c.primary and c.def.reconcile and not c.stopped then
      for key in pairs(c.primary.inf.store) do
        local h = self:hash(c, key)
        if h and ranges.contains(set, h) then c.queue:add(key) end
      end
      for key in pairs(c.shard_uids or {}) do
        local h = self:hash(c, key)
        if h and ranges.contains(set, h) then c.queue:add(key) end
      end
    end
  end
end

-- A sharded informer (luaop.informer.shard): it holds the namespaces of
-- the ranges this replica holds or is about to (what the ring gives it),
-- from the ring's first read on.
function Shard:attach(inf, owner)
  shard_informer.attach(inf, owner)
  self.informers[inf] = true
  if self.span then shard_informer.set(inf, self.span) end
end

function Shard:spanned(set)
  if self.span and ranges.equal(self.span, set) then return end
  self.span = set
  for inf in pairs(self.informers) do
    if inf.stopped then self.informers[inf] = nil else shard_informer.set(inf, set) end
  end
end

-- The namespaces the ring places keys by (luaop.shard.ring), when a
-- controller shards by namespace (the default) and none by uid: a Namespace informer of
-- its own; false until it synced. nil when one shards by uid: uniform
-- points then, for all (one set of ranges serves every controller).
function Shard:namespaces()
  local by_ns = false
  for _, c in pairs(self.manager.controllers) do
    local by = c.def.shard_by or M.DEFAULT_BY
    if by == "uid" then return nil end
    by_ns = by_ns or by == "namespace"
  end
  if not by_ns then return nil end -- ("none" alone: any points will do)
  if not self.ns then
    self.ns = informer.new("v1/Namespace", { client = self.manager.client }):start()
  end
  if not self.ns.synced then return false end
  local names = {}
  for name in pairs(self.ns.store) do names[#names + 1] = name end
  return names
end

-- opts: as luaop.shard.member's (ring, namespace, identity and timings).
function M.new(manager, opts)
  local s = setmetatable({ manager = manager, informers = setmetatable({}, { __mode = "k" }) }, Shard)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.drain = function(set, deadline) return s:drain(set, deadline) end
  o.gained = function(set) s:gained(set) end
  o.spanned = function(set) s:spanned(set) end
  o.namespaces = function() return s:namespaces() end
  s.member = member.new(o)
  return s
end

-- Run the membership (supervised) until stopped or lost; on_lost() then.
function Shard:start(on_lost)
  local m = self.member
  supervisor.spawn("shard", { name = "shard ring", done = function() return m.stopped or m.lost end },
    function() m:run(on_lost) end)
end

function Shard:release()
  self.member:release()
  if self.ns then self.ns:stop() end
end

return M
