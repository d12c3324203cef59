-- bench/compare.lua MODE ...: the writers and readers of bench/compare.sh.
--
--   jsonsize NS            the average compact JSON size of NS's ConfigMaps
--                          as a cache keeps them (no managedFields)
--   raw NS M               the writes a converged useless machine of M
--                          Machines needs, made directly, 64 at once: M
--                          Machine creates, 3M Switch creates (labelled,
--                          owned), M status writes; prints "seconds S"
--   state NS M             whether NS holds the converged end state: M
--                          Machines reading "ddd", 3 Switches each, all down,
--                          each controlled by its Machine; prints "ok" or
--                          what differs
local core = require "luaop.core"
local luaop = require "luaop"

local mode, ns = arg[1], arg[2]
local c = luaop.client()
local GROUP = "useless.container.training/v1alpha1"

-- run fn(i) for i = 1..n, `width` at once; raises the first error
local function concurrently(n, width, fn)
  local next_i = 0
  local function worker()
    while next_i < n do
      next_i = next_i + 1
      fn(next_i)
    end
  end
  local tasks = {}
  for i = 1, width do tasks[i] = luaop.spawn(worker) end
  for _, t in ipairs(tasks) do assert(t:wait()) end
end

if mode == "jsonsize" then
  local list = assert(c:list("v1/ConfigMap", { namespace = ns }))
  local bytes = 0
  for _, cm in ipairs(list.items) do
    cm.metadata.managedFields = nil
    bytes = bytes + #core.json.encode(cm)
  end
  print(("jsonsize %.1f"):format(bytes / #list.items))
  return 0
end

if mode == "raw" then
  local m = tonumber(arg[3])
  local t0 = luaop.time.monotonic()
  local machines = {}
  concurrently(m, 64, function(i)
    machines[i] = assert(c:create {
      apiVersion = GROUP, kind = "Machine",
      metadata = { name = ("m-%05d"):format(i), namespace = ns }, spec = { switches = 3 },
    })
  end)
  concurrently(3 * m, 64, function(i)
    local machine = machines[(i - 1) // 3 + 1]
    assert(c:create(luaop.set_controller({
      apiVersion = GROUP, kind = "Switch",
      metadata = { generateName = "switch-", namespace = ns, labels = { machine = machine.metadata.name } },
      spec = { position = "down" },
    }, machine)))
  end)
  concurrently(m, 64, function(i)
    local machine = machines[i]
    machine.status = { positions = "ddd" }
    assert(c:update_status(machine))
  end)
  print(("seconds %.3f"):format(luaop.time.monotonic() - t0))
  return 0
end

if mode == "state" then
  local m = tonumber(arg[3])
  local problems = {}
  local function problem(s) if #problems < 5 then problems[#problems + 1] = s end end
  local machines = assert(c:list(GROUP .. "/Machine", { namespace = ns })).items
  local switches = assert(c:list(GROUP .. "/Switch", { namespace = ns })).items
  if #machines ~= m then problem(("%d Machines, not %d"):format(#machines, m)) end
  if #switches ~= 3 * m then problem(("%d Switches, not %d"):format(#switches, 3 * m)) end
  local count = {}
  for _, mc in ipairs(machines) do
    if not (mc.status and mc.status.positions == "ddd") then
      problem(("Machine %s reads %s"):format(mc.metadata.name, mc.status and mc.status.positions))
    end
    count[mc.metadata.uid] = 0
  end
  for _, sw in ipairs(switches) do
    local owner = luaop.controller_of(sw)
    if not owner or count[owner.uid] == nil then
      problem("Switch " .. sw.metadata.name .. " has no Machine as its controller")
    else
      count[owner.uid] = count[owner.uid] + 1
    end
    if sw.spec.position ~= "down" then problem("Switch " .. sw.metadata.name .. " is " .. sw.spec.position) end
  end
  for _, mc in ipairs(machines) do
    local n = count[mc.metadata.uid]
    if n ~= 3 then problem(("Machine %s has %d Switches"):format(mc.metadata.name, n)) end
  end
  print(#problems == 0 and "ok" or table.concat(problems, "; "))
  return 0
end

error("mode: jsonsize, raw or state")
