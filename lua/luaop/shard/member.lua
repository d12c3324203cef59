-- luaop.shard.member - this replica's membership in a shard ring, and the
-- ranges of the hash space it holds (docs/sharding.md).
--
-- Each replica holds a coordination.k8s.io/v1 Lease of its own in the
-- ring's namespace, labelled with the ring, renewed every retry period as
-- leader election renews its lease. The members are the Leases of the
-- ring whose record this process saw change within their
-- leaseDurationSeconds, by its own monotonic clock from when it saw the
-- change (luaop.leader's rule), and whose holder is not "" (released).
-- The hash space is divided among the members by luaop.shard.ring.
--
-- Handover, so that no key has two writers: the Lease lists the ranges
-- its holder holds (annotation luaop.dev/shard-ranges). A replica
--   - releases a range it no longer should hold: it stops taking its keys,
--     lets the reconciles in flight for them finish (for at most the renew
--     deadline), closes the fence for it (core.shard.fence) and only then
--     writes its Lease without it;
--   - acquires a range it should hold only when no live member's Lease
--     lists any of it: it writes its Lease claiming it, reads the ring
--     again (a quorum read, after its write), and opens the fence for the
--     part no other live member claims by then; of two replicas claiming
--     at once, the later write is seen by the later read, so at most one
--     opens; a claim that met another is withdrawn (and tried again after
--     a random pause of up to two retry periods).
-- Writes for a key leave only while its hash is held, and every write
-- only until the renew deadline counted from the sending of the last
-- successful renew (core.api.fence_until): a member whose Lease others see
-- expire (a lease duration, longer than the renew deadline) has stopped
-- writing by then. Once a renew deadline passes without a successful
-- renew the replica has lost its membership, and exits as leader election
-- does.
local core = require "luaop.core"
local time = require "luaop.time"
local logging = require "luaop.logging"
local leases = require "luaop.lease"
local ranges = require "luaop.shard.ranges"
local ring = require "luaop.shard.ring"

local api = core.api

local M = {}
local Member = {}
Member.__index = Member

M.LABEL = "luaop.dev/shard-ring"
M.RANGES = "luaop.dev/shard-ranges"

-- A Lease's name for identity in ring: ring-identity, lower case, what a
-- DNS subdomain does not allow made "-".
function M.lease_name(ring_name, identity)
  local s = (ring_name .. "-" .. identity):lower():gsub("[^a-z0-9.-]", "-")
  s = s:sub(1, 253):gsub("[^a-z0-9]+$", "")
  return s
end

-- opts: ring, namespace, identity, lease_duration, renew_deadline,
-- retry_period (seconds); drain(set, deadline): returns once no reconcile
-- of a key in set runs (or at the deadline, task.now's clock); gained(set):
-- told of ranges acquired (their keys are queued again); spanned(set): the
-- ranges held or about to be (the sharded informers'); namespaces(): the
-- namespaces to place by (luaop.shard.ring), nil to place by uniform
-- points, false when not known yet.
function M.new(opts)
  local m = setmetatable({
    o = opts,
    collection = ("/apis/coordination.k8s.io/v1/namespaces/%s/leases"):format(opts.namespace),
    name = M.lease_name(opts.ring, opts.identity),
    held = {},      -- ranges fenced open (luaop.shard.ranges set)
    serving = {},   -- held, but not being released: where workers take keys
    desired = {},   -- what the ring gives this replica now
    members = {},   -- identities counted live in the last read
    observed = {},  -- Lease name -> {sig =, at =} (luaop.leader's observedTime)
    lost = false, stopped = false, joined = false,
    wake = core.task.cond(),
    round_done = core.task.cond(), -- after each round (release waits for one under way)
    backoff_until = 0, rounds = 0,
  }, Member)
  m.path = m.collection .. "/" .. m.name
  m.log = logging.logger("shard"):with { ring = opts.ring, identity = opts.identity }
  m.key = api.fence(m.path) -- marks the member's own Lease writes
  core.shard.fence {}       -- and no write for a key leaves before it holds it
  local series = core.metrics.series
  m.metric = {
    members = series("luaop_shard_members", { opts.ring }),
    share = series("luaop_shard_share", { opts.ring }),
    ranges = series("luaop_shard_ranges", { opts.ring }),
    acquired = series("luaop_shard_handovers_total", { opts.ring, "acquired" }),
    released = series("luaop_shard_handovers_total", { opts.ring, "released" }),
    conflict = series("luaop_shard_handovers_total", { opts.ring, "conflict" }),
  }
  m.metric.share:set(0)
  m.metric.ranges:set(0)
  return m
end

function Member:request(method, path, body)
  return leases.request(self.key, self.o.renew_deadline, method, path, body)
end

local function duration_of(self, spec)
  return leases.duration(spec, self.o.lease_duration)
end

-- Read the ring: every Lease of it, observed now. Returns the live others
-- ({identity, claims}) and this replica's own Lease (or nil), or nil when
-- the read failed.
function Member:read()
  local sel = M.LABEL .. "=" .. self.o.ring
  local status, list, text = self:request("GET", self.collection .. "?labelSelector=" .. sel:gsub("/", "%%2F"))
  if status ~= 200 or type(list) ~= "table" or type(list.items) ~= "table" then
    self.log:debug("could not read the ring", { status = status, error = text })
    return nil
  end
  local now = core.task.now() -- when the answer came (a slow read makes nothing older)
  local others, mine, seen, stale = {}, nil, {}, {}
  for _, lease in ipairs(list.items) do
    local md, spec = lease.metadata or {}, lease.spec or {}
    local name = md.name
    if type(name) == "string" then
      seen[name] = true
      local claims = md.annotations and md.annotations[M.RANGES]
      local sig = table.concat({ tostring(spec.holderIdentity), tostring(spec.renewTime),
        tostring(spec.leaseDurationSeconds), tostring(claims) }, "\0")
      local o = self.observed[name]
      if not o or o.sig ~= sig then
        o = { sig = sig, at = now }
        self.observed[name] = o
      end
      local holder = spec.holderIdentity
      if name ~= self.name and now - o.at > duration_of(self, spec) * (holder == "" and 1 or M.FORGET) then
        stale[#stale + 1] = lease -- (left the ring, or long dead: luaop.shard.member's forget)
      end
      if name == self.name then
        mine = lease
      else
        if type(holder) == "string" and holder ~= "" and o.at + duration_of(self, spec) > now then
          local set = ranges.decode(claims or "")
          if not set then
            -- not a list this code writes: counted as claiming everything,
            -- which can only delay, never double, a writer
            if not o.warned then
              o.warned = true
              self.log:error("a Lease of the ring lists ranges that cannot be read: taken as all of them",
                { lease = name, ranges = tostring(claims) })
            end
            set = ranges.ALL
          end
          others[#others + 1] = { identity = holder, claims = set, name = name }
        end
      end
    end
  end
  for name in pairs(self.observed) do
    if not seen[name] then self.observed[name] = nil end
  end
  self.stale = stale
  return others, mine
end

-- The Leases of members that left (holder "") a lease duration ago, or
-- unchanged for M.FORGET lease durations: deleted (their identities are
-- random, so each start of a replica leaves one more), with the
-- resourceVersion read, so that one renewed meanwhile stays.
M.FORGET = 10
function Member:forget()
  for _, lease in ipairs(self.stale or {}) do
    local md = lease.metadata
    local status, _, text = self:request("DELETE", self.collection .. "/" .. md.name, {
      apiVersion = "v1", kind = "DeleteOptions", preconditions = { resourceVersion = md.resourceVersion } })
    if status == 200 then
      self.log:info("deleted the Lease of a member gone", { lease = md.name })
    elseif status ~= 404 and status ~= 409 then
      self.log:debug("could not delete the Lease of a member gone", { lease = md.name, status = status, error = text })
    end
  end
  self.stale = nil
end

-- Write this replica's Lease listing set (the lease read as mine, or nil
-- to create it). True and when it was sent (task.now's clock) on success.
function Member:write(mine, set, holder)
  local o = self.o
  local wall = time.format_micro(core.task.wall())
  local spec = {
    holderIdentity = holder or o.identity, leaseDurationSeconds = math.ceil(o.lease_duration),
    acquireTime = mine and mine.spec and mine.spec.acquireTime or wall, renewTime = wall,
    leaseTransitions = mine and mine.spec and mine.spec.leaseTransitions or 0,
  }
  local sent = core.task.now()
  local status, _, text
  if mine then
    local md = mine.metadata
    md.annotations = type(md.annotations) == "table" and md.annotations or {}
    md.annotations[M.RANGES] = ranges.encode(set)
    md.labels = type(md.labels) == "table" and md.labels or {}
    md.labels[M.LABEL] = o.ring
    mine.spec = spec
    status, _, text = self:request("PUT", self.path, mine)
    if status == 200 then return true, sent end
  else
    status, _, text = self:request("POST", self.collection, {
      apiVersion = "coordination.k8s.io/v1", kind = "Lease",
      metadata = { name = self.name, namespace = o.namespace, labels = { [M.LABEL] = o.ring },
        annotations = { [M.RANGES] = ranges.encode(set) } },
      spec = spec,
    })
    if status == 201 then return true, sent end
  end
  self.log:debug("could not write the member lease", { status = status, error = text })
  return false
end

local function claimed(others)
  local all = {}
  for _, x in ipairs(others) do all = ranges.union(all, x.claims) end
  return all
end

function Member:set_held(set)
  self.held = set
  core.shard.fence(set)
  self.metric.share:set(ranges.share(set))
  self.metric.ranges:set(#set)
end

function Member:set_serving(set)
  self.serving = set
end

-- One round: read the ring, release what is no longer this replica's,
-- claim what is and nobody holds, renew. True when the renew succeeded.
function Member:round()
  local o = self.o
  -- past the renew deadline the membership is gone, whatever a write would
  -- answer now (a process paused past it finds its own Lease as it left
  -- it, while the others took its ranges over): never renewed from here
  if self:lapsed() then return false end
  local others, mine = self:read()
  if not others then return false end
  local ids = { o.identity }
  for _, x in ipairs(others) do ids[#ids + 1] = x.identity end
  table.sort(ids)
  self.members = ids
  self.metric.members:set(#ids)
  -- by namespace, the namespaces' own points (luaop.shard.ring); not known
  -- yet (false): what the ring gave before stands
  local names = o.namespaces and o.namespaces()
  if names then
    self.desired = ring.assign_namespaces(ids, names)[o.identity] or {}
  elseif names == nil then
    self.desired = ring.assign(ids)[o.identity] or {}
  end
  -- the first round only joins: replicas started together see each other
  -- at the next, before any claims (or lists) a part that is not its own
  self.rounds = self.rounds + 1
  local joining = self.rounds == 1
  -- the informers hold what this replica holds or is about to
  if not joining then o.spanned(ranges.union(self.desired, self.held)) end
  -- release first: stop taking the keys, drain them, close the fence
  local releasing = ranges.subtract(self.held, self.desired)
  if #releasing > 0 then
    self:set_serving(ranges.intersect(self.held, self.desired))
    -- (for at most what leaves this round a retry period to renew before
    -- the fence's deadline: a reconcile longer than that has its writes
    -- fenced from then on, which is safe)
    local last = self.last or core.task.now()
    self.o.drain(releasing, math.min(core.task.now() + o.renew_deadline, last + o.renew_deadline - o.retry_period))
    self:set_held(ranges.subtract(self.held, releasing))
    self.metric.released:add()
    self.log:info("released ranges", { ranges = #releasing, released = ranges.share(releasing),
      share = ranges.share(self.held) })
    self.log:debug("released", { ranges = ranges.encode(releasing) })
  end
  -- then claim what the ring gives and no live member lists
  local want = {}
  if not joining and core.task.now() >= self.backoff_until then
    want = ranges.subtract(ranges.subtract(self.desired, self.held), claimed(others))
  end
  if self:lapsed() then return false end -- (the read, or the drain, took it past)
  local ok, sent = self:write(mine, ranges.union(self.held, want))
  if not ok then return false end
  self.joined = true
  api.fence_until(sent + o.renew_deadline)
  self.last = sent
  self:forget()
  if #want > 0 then
    -- read again, after the claim is written: another's claim written
    -- before it is seen now; the later of two is the one to give way
    local again = self:read()
    local got = {}
    if again then
      got = ranges.subtract(want, claimed(again))
      if not ranges.equal(got, want) then
        self.metric.conflict:add()
        self.backoff_until = core.task.now() + math.random() * 2 * o.retry_period
        self.log:info("withdrew a claim another member made at the same time", {
          ranges = ranges.encode(ranges.subtract(want, got)) })
      end
    end
    -- (a failed read opens nothing: the claim stays written, and is
    -- confirmed or withdrawn next round)
    if #got > 0 then
      self:set_held(ranges.union(self.held, got))
      self.metric.acquired:add()
      self.log:info("acquired ranges", { ranges = #got, acquired = ranges.share(got), share = ranges.share(self.held) })
      self.log:debug("acquired", { ranges = ranges.encode(got) })
      self.o.gained(got)
    end
  end
  self:set_serving(ranges.intersect(self.held, self.desired))
  if not joining then o.spanned(ranges.union(self.desired, self.held)) end
  return true
end

-- Whether the renew deadline from the last successful write has passed
-- (the fence is shut: core.api.fence_until).
function Member:lapsed()
  return self.joined and core.task.now() > self.last + self.o.renew_deadline
end

function Member:pause(seconds)
  if not self.stopped then self.wake:wait(seconds) end
end

-- Run until stopped or lost; on_lost() once a renew deadline passes
-- without a successful renew.
function Member:run(on_lost)
  local o = self.o
  self.log:info("joining the shard ring", { lease = o.namespace .. "/" .. self.name })
  self.last = self.last or core.task.now()
  while not self.stopped do
    self.busy = true
    local ok = self:round()
    self.busy = false
    self.round_done:signal()
    if not ok and self:lapsed() then
      self.lost = true
      self:set_serving({})
      self:set_held({})
      api.fence_until(0)
      self.log:error("shard ring membership lost", { renewDeadline = o.renew_deadline })
      on_lost()
      return
    end
    -- jittered, as client-go's JitterUntil: rounds of two replicas drift apart
    self:pause(o.retry_period * (1 + 0.2 * math.random()))
  end
end

-- Leave the ring (after the drain): no ranges, holder "", so that the
-- others take them over at their next round.
function Member:release()
  self.stopped = true
  self.wake:signal()
  -- a round under way would make the update below a Conflict: let it end
  if self.busy then self.round_done:wait(self.o.renew_deadline) end
  self:set_serving({})
  self:set_held({})
  if self.lost or not self.joined then return end
  local status, mine = self:request("GET", self.path)
  local ok = status == 200 and type(mine) == "table" and self:write(mine, {}, "")
  api.fence_until(0)
  if ok then
    self.log:info("left the shard ring", {})
  else
    self.log:error("could not release the member lease: it expires on its own", { status = status })
  end
end

-- Whether hash h is a key this replica takes now.
function Member:serves(h)
  return ranges.contains(self.serving, h)
end

return M
