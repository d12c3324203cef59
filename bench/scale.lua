-- bench/scale.lua MODE ... - the objects bench/scale.sh caches, and the
-- steady stream of changes it measures a running controller under; prints
-- one "name value" line per measure.
--
--   create KIND NS FROM TO [NODE]
--                create objects FROM..TO of KIND in NS, 100 at once:
--                ConfigMaps cm-N of about 1 KiB of compact JSON (800
--                bytes of random base64 text, as bench/cache.lua's), or
--                Pods pod-N bound to NODE by spec.nodeName (so that the
--                scheduler is not the bottleneck), each then given the
--                status kwok would give it (Running and Ready) by a write
--                of its own: kwok writes some 100 statuses a second here,
--                so 300k Pods would wait some 50 minutes for it
--   settle Pod NS
--                wait until kwok has run every Pod in NS (none Pending,
--                asked every 2 s): its status writes, about 100 a second
--                here, are a churn of their own that would load the API
--                server under a sync being measured; prints the seconds
--                (fails after an hour)
--   delete KIND NS N
--                delete objects 1..N of KIND in NS, 100 at once
--   churn KIND NS N RATE SECONDS TAG
--                change one object after another (a merge patch of label
--                bench-tick to TAG-i, over the N objects in turn: a TAG of
--                its own for each run, or a value an earlier run set
--                would change nothing) at RATE a second
--                for SECONDS, at most 64 at once: each change due at its
--                time on a fixed schedule, so a slow answer delays only
--                what waits for it; prints the changes made and the rate
--                achieved
local luaop = require "luaop"

local mode, kind, ns = arg[1], arg[2], arg[3]
local c = luaop.client()
local function out(name, v) print(("%s %s"):format(name, v)) end
local function name_of(i) return (kind == "Pod" and "pod-%07d" or "cm-%07d"):format(i) end

if mode == "create" then
  local creator = require "bench.creator"
  local from, to, node = tonumber(arg[4]), tonumber(arg[5]), arg[6]
  local now = luaop.time.format(luaop.time.wall())
  local seconds, failed = creator.create(c, from, to, function(i)
    if kind == "Pod" then
      return { apiVersion = "v1", kind = "Pod", metadata = { name = name_of(i), namespace = ns,
        labels = { bench = "scale" } },
        spec = { nodeName = node, containers = { { name = "c", image = "busybox" } },
          tolerations = { { operator = "Exists" } } } }
    end
    local payload = creator.payload()
    return { apiVersion = "v1", kind = "ConfigMap", metadata = { name = name_of(i), namespace = ns,
      labels = { bench = "scale" } }, data = { a = payload:sub(1, 400), b = payload:sub(401) } }
  end, kind == "Pod" and function(pod, i)
    -- running, as kwok's pod-ready stage writes it (hack/kwok/kwokctl.yaml),
    -- so kwok, which writes some 100 a second here, has nothing left to do
    local ip = ("10.%d.%d.%d"):format(100 + (i >> 16) % 100, (i >> 8) & 255, i & 255)
    local ready = function(t) return { type = t, status = "True", lastTransitionTime = now } end
    pod.status = { phase = "Running", startTime = now, hostIP = "10.0.0.1", hostIPs = { { ip = "10.0.0.1" } },
      podIP = ip, podIPs = { { ip = ip } },
      conditions = { ready "Initialized", ready "Ready", ready "ContainersReady" },
      containerStatuses = { { name = "c", image = "busybox", ready = true, restartCount = 0,
        state = { running = { startedAt = now } } } } }
    return select(2, c:update_status(pod))
  end or nil)
  out("create_s", ("%.3f"):format(seconds))
  return failed == 0 and 0 or 1
end

if mode == "churn" then
  local n, rate, seconds, tag = tonumber(arg[4]), tonumber(arg[5]), tonumber(arg[6]), arg[7] or "t"
  local total = math.floor(rate * seconds)
  local t0, next_i, done, failed = luaop.time.monotonic(), 0, 0, 0
  local function worker()
    while next_i < total do
      next_i = next_i + 1
      local i = next_i
      local wait = t0 + (i - 1) / rate - luaop.time.monotonic()
      if wait > 0 then luaop.sleep(wait) end
      local _, err = c:patch(kind, { namespace = ns, name = name_of((i - 1) % n + 1) },
        { metadata = { labels = { ["bench-tick"] = tag .. "-" .. i } } })
      if err then failed = failed + 1 else done = done + 1 end
    end
  end
  local tasks = {}
  for i = 1, 64 do tasks[i] = luaop.spawn(worker) end
  for _, t in ipairs(tasks) do assert(t:wait()) end
  local elapsed = luaop.time.monotonic() - t0
  out("changes", done)
  out("failed", failed)
  out("rate", ("%.1f"):format(done / elapsed))
  return 0
end

if mode == "settle" then
  local t0 = luaop.time.monotonic()
  while true do
    local page, err = c:first_page(kind, { namespace = ns, field_selector = "status.phase=Pending", limit = 1 })
    if page and #page.items == 0 then break end
    if not page then io.stderr:write(("scale: %s\n"):format(err)) end
    if luaop.time.monotonic() - t0 > 3600 then
      io.stderr:write("scale: Pods still Pending after an hour\n")
      return 1
    end
    luaop.sleep(2)
  end
  out("settle_s", ("%.1f"):format(luaop.time.monotonic() - t0))
  return 0
end

if mode == "delete" then
  local seconds, failed = require("bench.creator").delete(c, kind, ns, 1, tonumber(arg[4]), name_of)
  out("delete_s", ("%.3f"):format(seconds))
  return failed == 0 and 0 or 1
end

error("mode: create, settle, churn or delete")
