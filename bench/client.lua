-- bench/client.lua NS N ROUND: time N sequential and N concurrent GETs and
-- creates through the luaop client; prints one "name seconds" line per measure.
local luaop = require "luaop"
local ns, n, round = arg[1], tonumber(arg[2]), arg[3]
local c = luaop.client()

local function measure(name, fn)
  local t0 = luaop.time.monotonic()
  fn()
  print(("%s %.6f"):format(name, luaop.time.monotonic() - t0))
end

local function cm(name)
  return { apiVersion = "v1", kind = "ConfigMap", metadata = { name = name, namespace = ns }, data = { k = "v" } }
end

assert(c:get("ConfigMap", "target", ns)) -- discovery and connection warmed up

measure("get_seq", function()
  for _ = 1, n do assert(c:get("ConfigMap", "target", ns)) end
end)
measure("get_conc", function()
  local tasks = {}
  for i = 1, n do tasks[i] = luaop.spawn(function() return assert(c:get("ConfigMap", "target", ns)) end) end
  for _, t in ipairs(tasks) do assert(t:wait()) end
end)
measure("create_seq", function()
  for i = 1, n do assert(c:create(cm(("luaop-%s-seq-%d"):format(round, i)))) end
end)
measure("create_conc", function()
  local tasks = {}
  for i = 1, n do
    tasks[i] = luaop.spawn(function() return assert(c:create(cm(("luaop-%s-conc-%d"):format(round, i)))) end)
  end
  for _, t in ipairs(tasks) do assert(t:wait()) end
end)
