-- bench/converge.lua MODE NS N: the writers of bench/converge.sh.
--
--   machines NS N   create N Machines of 3 switches in NS, 64 at once
--   watch NS N      print "ready" once watching, then wait until all N
--                   Machines of NS read positions "ddd"
--   raw NS N        create N ConfigMaps in NS, 64 at once (the API server's
--                   raw write rate, to compare with)
-- Each prints "start T", "end T" and "seconds S" (T: the monotonic clock,
-- the same in every process, so ends and starts of two compare).
local luaop = require "luaop"

local mode, ns, n = arg[1], arg[2], tonumber(arg[3])
local c = luaop.client()

local function concurrently(count, make)
  local next_i = 0
  local function worker()
    while next_i < count do
      next_i = next_i + 1
      local _, err = c:create(make(next_i))
      if err then error(err) end
    end
  end
  local tasks = {}
  for i = 1, 64 do tasks[i] = luaop.spawn(worker) end
  for _, t in ipairs(tasks) do
    local ok, err = t:wait()
    if not ok then error(err) end
  end
end

local t0 = luaop.time.monotonic()
print(("start %.6f"):format(t0))
if mode == "machines" then
  concurrently(n, function(i)
    return {
      apiVersion = "useless.container.training/v1alpha1", kind = "Machine",
      metadata = { name = ("m-%05d"):format(i), namespace = ns }, spec = { switches = 3 },
    }
  end)
elseif mode == "raw" then
  concurrently(n, function(i)
    return { apiVersion = "v1", kind = "ConfigMap", metadata = { name = ("raw-%05d"):format(i), namespace = ns },
      data = { k = "v" } }
  end)
elseif mode == "watch" then
  local done, count = {}, 0
  local list = assert(c:list("useless.container.training/v1alpha1/Machine", { namespace = ns }))
  local function see(m)
    local ok = m.status and m.status.positions == "ddd"
    if ok and not done[m.metadata.name] then done[m.metadata.name] = true; count = count + 1 end
  end
  for _, m in ipairs(list.items) do see(m) end
  local rv = list.metadata.resourceVersion
  print("ready")
  io.stdout:flush()
  while count < n do
    local w = assert(c:watch("useless.container.training/v1alpha1/Machine", { namespace = ns, resource_version = rv }))
    for _, m in w:events() do
      rv = m.metadata.resourceVersion
      see(m)
      if count >= n then break end
    end
    w:close()
  end
else
  error("mode: machines, watch or raw")
end
print(("end %.6f"):format(luaop.time.monotonic()))
print(("seconds %.3f"):format(luaop.time.monotonic() - t0))
