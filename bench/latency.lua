-- bench/latency.lua MODE NS ...: event-to-reconcile latency of a controller
-- under a stream of updates.
--
--   create NS N                  create ConfigMaps lat-1 .. lat-N in NS
--   writer NS N RATE SECONDS     merge-patch them round-robin, paced at RATE
--                                a second (64 patches at once at most), until
--                                SECONDS are over; prints "patches", "seconds",
--                                "errors"
--   controller NS READY DONE [MS] a manager with one controller on the
--                                ConfigMaps of NS (each reconcile sleeps MS
--                                milliseconds, default 0); touches READY once
--                                the first reconciles are done, runs until
--                                DONE exists, then prints the latencies
--
-- The latency of an update event is the time from the shared informer
-- delivering it (a handler of our own on the same informer, added before
-- the controller's) to the start of the reconcile that handles it. The work
-- queue collapses updates of a key waiting to be reconciled: a reconcile
-- counts against the earliest event of its key not yet reconciled, and
-- events it collapsed are not counted again. A probe on the controller's
-- work queue (an internal: the manager's c.queue, wrapped here) splits the
-- latency into event -> a worker takes the key, and that -> reconcile starts.
local luaop = require "luaop"
local informer = require "luaop.informer"
local manager = require "luaop.manager"

local mode, ns = arg[1], arg[2]
local c = luaop.client()
local function out(name, v) print(("%s %s"):format(name, v)) end
local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

if mode == "create" then
  for i = 1, tonumber(arg[3]) do
    assert(c:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "lat-" .. i, namespace = ns },
      data = { n = "0" } })
  end
  return 0
end

if mode == "writer" then
  local n, rate, secs = tonumber(arg[3]), tonumber(arg[4]), tonumber(arg[5])
  local issued, done, errors = 0, 0, 0
  local t0 = luaop.time.monotonic()
  local function worker()
    while true do
      local i = issued -- the i-th patch is due at t0 + i / rate, until SECONDS
      local wait = t0 + i / rate - luaop.time.monotonic()
      if i / rate >= secs or luaop.time.monotonic() - t0 >= secs then return end
      issued = i + 1
      if wait > 0 then luaop.sleep(wait) end
      local _, err = c:patch("ConfigMap", { namespace = ns, name = "lat-" .. (i % n + 1) },
        { data = { n = tostring(i + 1) } })
      if err then errors = errors + 1 else done = done + 1 end
    end
  end
  local tasks = {}
  for k = 1, 64 do tasks[k] = luaop.spawn(worker) end
  for _, t in ipairs(tasks) do assert(t:wait()) end
  out("patches", done)
  out("seconds", ("%.3f"):format(luaop.time.monotonic() - t0))
  out("errors", errors)
  return errors == 0 and 0 or 1
end

if mode ~= "controller" then error("mode: create, writer or controller") end

local ready, done, work = arg[3], arg[4], tonumber(arg[5] or "0") / 1000
local pending = {}   -- key -> time of its earliest event not yet reconciled
local latencies, queued, started = {}, {}, {} -- total, event -> get, get -> start
local taken = {}     -- key -> when a worker took it from the queue
local events, reconciles, first, last = 0, 0, nil, nil

local function cpu_seconds() -- utime + stime of this process
  local f = assert(io.open("/proc/self/stat"))
  local s = f:read("a")
  f:close()
  local fields = {}
  for x in s:match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = x end
  return (tonumber(fields[12]) + tonumber(fields[13])) / 100 -- fields 14 and 15 of stat, in ticks
end

local m = manager.new()
m:informer("v1/ConfigMap", { namespace = ns }):on {
  update = function(_, obj)
    local now = luaop.time.monotonic()
    local k = informer.key(obj)
    events, last = events + 1, now
    first = first or now
    pending[k] = pending[k] or now
  end,
}
local ctl = m:add {
  name = "latency", resource = "v1/ConfigMap", namespace = ns,
  reconcile = function(_, req)
    local now = luaop.time.monotonic()
    local k = req.namespace .. "/" .. req.name
    reconciles = reconciles + 1
    if pending[k] then
      latencies[#latencies + 1] = now - pending[k]
      queued[#queued + 1] = taken[k] - pending[k]
      started[#started + 1] = now - taken[k]
      pending[k] = nil
    end
    if work > 0 then luaop.sleep(work) end
  end,
}
local q = ctl.queue
local function took(k)
  if k then taken[k] = luaop.time.monotonic() end
  return k
end
-- (workers take keys with take(), which waits; older builds polled get())
ctl.queue = setmetatable({
  get = function() return took(q:get()) end,
  take = function() return took(q:take()) end,
}, { __index = function(_, method) return function(_, ...) return q[method](q, ...) end end })
m:start()
local objects = #m:informer("v1/ConfigMap", { namespace = ns }):list()
while reconciles < objects do luaop.sleep(0.05) end -- the initial adds
reconciles = 0
local cpu0 = cpu_seconds()
assert(io.open(ready, "w")):close()
while not exists(done) do luaop.sleep(0.1) end
luaop.sleep(1) -- let the last events through
local cpu = cpu_seconds() - cpu0
m:stop(5)

local sum = 0
for _, l in ipairs(latencies) do sum = sum + l end
local function pct(list, p)
  if #list == 0 then return 0 end
  return list[math.max(1, math.ceil(p * #list))] * 1000
end
for _, list in ipairs { latencies, queued, started } do table.sort(list) end
out("events", events)
out("event_rate", ("%.1f"):format(events > 1 and (events - 1) / (last - first) or 0))
out("reconciles", reconciles)
out("measured", #latencies)
out("p50_ms", ("%.3f"):format(pct(latencies, 0.50)))
out("p99_ms", ("%.3f"):format(pct(latencies, 0.99)))
out("max_ms", ("%.3f"):format(pct(latencies, 1)))
out("mean_ms", ("%.3f"):format(sum / math.max(#latencies, 1) * 1000))
out("queued_p50_ms", ("%.3f"):format(pct(queued, 0.50)))
out("queued_p99_ms", ("%.3f"):format(pct(queued, 0.99)))
out("started_p50_ms", ("%.3f"):format(pct(started, 0.50)))
out("started_p99_ms", ("%.3f"):format(pct(started, 0.99)))
out("cpu_s", ("%.2f"):format(cpu))
return 0
