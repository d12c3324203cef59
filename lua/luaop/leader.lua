-- luaop.leader - leader election on a coordination.k8s.io/v1 Lease, as
-- client-go's leaderelection does it (LeaseLock, the record in the Lease's
-- spec): every retry period a candidate reads the Lease; it takes it when
-- nobody holds it, or when the holder has not changed the record for a
-- lease duration; the leader renews it every retry period, and has lost it
-- once a renew deadline passes without a successful renew. Every update
-- carries the resourceVersion it read (optimistic concurrency: a Conflict
-- is a failed try).
--
-- Expiry is judged by this process's monotonic clock from the moment it
-- last saw the record change (when the GET that showed the change came
-- back, however long it took), for the record's own leaseDurationSeconds,
-- never by the Lease's timestamps (clocks in a cluster disagree): as
-- client-go's observedTime. And the core fences writes (core.api.fence): from the
-- start, no write leaves the process unless it holds the lease, until the
-- renew deadline counted from the sending of its last successful renew,
-- checked the moment a request is sent; but the election's own create,
-- renew and release, made with the key core.api.fence handed out (kept in
-- the elector, out of every script's reach). A write to the Lease by
-- anyone else is fenced like any other.
local core = require "luaop.core"
local time = require "luaop.time"
local logging = require "luaop.logging"
local leases = require "luaop.lease"

local api = core.api

local M = {}
local Elector = {}
Elector.__index = Elector

-- opts: namespace, name, identity, lease_duration, renew_deadline,
-- retry_period (seconds).
function M.new(opts)
  local e = setmetatable({
    o = opts,
    collection = ("/apis/coordination.k8s.io/v1/namespaces/%s/leases"):format(opts.namespace),
    log = logging.logger("leader"):with { lease = opts.namespace .. "/" .. opts.name, identity = opts.identity },
    leading = false, lost = false, stopped = false,
    elected = core.task.cond(), -- signalled on acquiring, and on losing
    wake = core.task.cond(),    -- ends a wait between tries early (stop)
    tried = core.task.cond(),   -- signalled after each try (release waits for one under way)
    trying = false,
    status = core.metrics.series("leader_election_master_status", { opts.name }),
  }, Elector)
  e.path = e.collection .. "/" .. opts.name
  core.metrics.series("leader_election_slowpath_total", { opts.name })
  e.status:set(0)
  e.key = api.fence(e.path) -- marks the election's own requests (request below)
  return e
end

-- A MicroTime, as the API server writes one: RFC 3339, UTC, microseconds.
local micro_time = time.format_micro

local fields = { "holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions" }

local function same(a, b)
  for _, f in ipairs(fields) do
    if a[f] ~= b[f] then return false end
  end
  return true
end

function Elector:request(method, path, body)
  return leases.request(self.key, self.o.renew_deadline, method, path, body)
end

-- Note the record as seen now: a change restarts its lease duration.
function Elector:observe(spec, now)
  if not self.observed or not same(self.observed, spec) then
    local copy = {}
    for _, f in ipairs(fields) do copy[f] = spec[f] end
    self.observed, self.observed_at = copy, now
  end
end

-- How long a record holds its lease: its leaseDurationSeconds (the
-- holder's, which may be longer than this process's), or this process's
-- own when the record has none that is a positive number.
function Elector:duration_of(spec)
  return leases.duration(spec, self.o.lease_duration)
end

-- One try to acquire or renew: true and when it was sent (task.now's
-- clock) when the lease is ours after it.
function Elector:try()
  self.trying = true
  local ok, sent = self:try_once()
  self.trying = false
  self.tried:signal()
  return ok, sent
end

function Elector:try_once()
  local o = self.o
  local sent = core.task.now()
  local status, lease, text = self:request("GET", self.path)
  local wall = micro_time(core.task.wall())
  local record = {
    holderIdentity = o.identity, leaseDurationSeconds = math.ceil(o.lease_duration),
    acquireTime = wall, renewTime = wall, leaseTransitions = 0,
  }
  if status == 404 then
    local post_status, _, post_text = self:request("POST", self.collection, {
      apiVersion = "coordination.k8s.io/v1", kind = "Lease",
      metadata = { name = o.name, namespace = o.namespace }, spec = record,
    })
    if post_status ~= 201 then
      self.log:debug("could not create the lease", { status = post_status, error = post_text })
      return false
    end
    self:observe(record, sent)
    return true, sent
  end
  if status ~= 200 or type(lease) ~= "table" then
    self.log:debug("could not read the lease", { status = status, error = text })
    return false
  end
  local spec = lease.spec or {}
  -- seen now, when the answer came: a renewal the GET was slow to bring is
  -- as fresh as when it arrived
  self:observe(spec, core.task.now())
  local holder = spec.holderIdentity or ""
  if holder ~= "" and holder ~= o.identity and self.observed_at + self:duration_of(spec) > core.task.now() then
    return false -- another's, and not expired by this process's clock
  end
  if holder == o.identity then
    record.acquireTime = spec.acquireTime or wall
    record.leaseTransitions = spec.leaseTransitions or 0
  else
    record.leaseTransitions = (spec.leaseTransitions or 0) + 1
  end
  lease.spec = record -- with the resourceVersion it read
  local put_status, _, put_text = self:request("PUT", self.path, lease)
  if put_status ~= 200 then
    self.log:debug("could not update the lease", { status = put_status, error = put_text })
    return false
  end
  self:observe(record, sent)
  return true, sent
end

function Elector:pause(seconds)
  if not self.stopped then self.wake:wait(seconds) end
end

-- Run until stopped or lost: acquire, call on_lead(), renew; on_lost()
-- once a renew deadline passes without a successful renew.
function Elector:run(on_lead, on_lost)
  local o = self.o
  self.log:info("attempting to acquire leader lease", {})
  local ok, sent
  while not self.stopped do
    ok, sent = self:try()
    if ok then break end
    self:pause(o.retry_period)
  end
  if self.stopped then return end
  api.fence_until(sent + o.renew_deadline)
  self.leading, self.acquired_at = true, core.task.now()
  self.status:set(1)
  self.log:info("successfully acquired lease", {})
  self.elected:signal()
  on_lead()
  local last = sent
  while not self.stopped do
    self:pause(o.retry_period)
    if self.stopped then break end
    ok, sent = self:try()
    if ok then
      last = sent
      api.fence_until(sent + o.renew_deadline)
    elseif core.task.now() > last + o.renew_deadline then
      self.leading, self.lost = false, true
      self.status:set(0)
      api.fence_until(0)
      self.log:error("leader election lost", { renewDeadline = o.renew_deadline })
      self.elected:signal()
      on_lost()
      return
    end
  end
end

-- Stop trying; when leading, give the lease up (client-go's
-- ReleaseOnCancel): holder "", a lease of 1 s, so that a standby takes
-- over at its next try.
function Elector:release()
  self.stopped = true
  self.wake:signal()
  if not self.leading then return end
  self.leading = false
  self.status:set(0)
  -- a renew under way would make the update below a Conflict: let it end
  if self.trying then self.tried:wait(self.o.renew_deadline) end
  local status
  for _ = 1, 3 do -- a Conflict: read it again
    local lease
    status, lease = self:request("GET", self.path)
    if status ~= 200 or type(lease) ~= "table" or not lease.spec or lease.spec.holderIdentity ~= self.o.identity then
      break
    end
    local wall = micro_time(core.task.wall())
    lease.spec = { holderIdentity = "", leaseDurationSeconds = 1, acquireTime = wall, renewTime = wall,
      leaseTransitions = lease.spec.leaseTransitions or 0 }
    status = self:request("PUT", self.path, lease)
    if status ~= 409 then break end
  end
  api.fence_until(0)
  if status == 200 then
    self.log:info("released the leader lease", {})
  else
    self.log:error("could not release the leader lease: it expires on its own", { status = status })
  end
end

return M
