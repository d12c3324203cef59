-- bench/shard.lua PREFIX NNS N: create N ConfigMaps of about 1 KiB of
-- compact JSON (as bench/cache.lua's), labelled bench=shard, spread round
-- robin over namespaces PREFIX-0 .. PREFIX-(NNS-1) (made first, labelled
-- bench-shard=PREFIX), 100 at
-- once; prints "create_s SECONDS".
local luaop = require "luaop"

local prefix, nns, n = arg[1], tonumber(arg[2]), tonumber(arg[3])
local c = luaop.client()
for i = 0, nns - 1 do
  local _, err = c:create { apiVersion = "v1", kind = "Namespace",
    metadata = { name = prefix .. "-" .. i, labels = { ["bench-shard"] = prefix } } }
  if err and not luaop.is_error(err, "AlreadyExists") then error(err) end
end
local abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local chunk = {}
for i = 1, 1 << 20 do
  local r = math.random(1, 64)
  chunk[i] = abc:sub(r, r)
end
local pool = table.concat(chunk)
local next_i, failed = 0, 0
local function worker()
  while next_i < n do
    next_i = next_i + 1
    local i, off = next_i, math.random(1, #pool - 800)
    local payload = pool:sub(off, off + 799)
    local _, err = c:create {
      apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = ("cm-%06d"):format(i), namespace = prefix .. "-" .. (i % nns), labels = { bench = "shard" } },
      data = { a = payload:sub(1, 400), b = payload:sub(401) },
    }
    if err then failed = failed + 1; luaop.log:error("create failed", { error = tostring(err) }) end
  end
end
local t0, tasks = luaop.time.monotonic(), {}
for i = 1, 100 do tasks[i] = luaop.spawn(worker) end
for _, t in ipairs(tasks) do assert(t:wait()) end
print(("create_s %.3f"):format(luaop.time.monotonic() - t0))
return failed == 0 and 0 or 1
