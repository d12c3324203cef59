-- bench/cache.lua MODE NS [N]: the informer cache against a raw LIST; prints
-- one "name value" line per measure.
--
--   create NS N [FROM [NNS]]
--                create ConfigMaps cm-FROM..cm-N (FROM 1: N of them) of
--                about 1 KiB of compact JSON in NS, 100 at once; with NNS,
--                round robin in namespaces NS-0 .. NS-(NNS-1) instead, made
--                first and labelled bench-shard=NS (bench/shard.sh)
--   time NS      in this one process, after a warm-up pass: a raw paged LIST
--                (GETs of limit=500 pages through core.api.request, bodies not
--                decoded: the continue token is read from the text), the same
--                pages decoded but not kept, and an informer from start() to
--                wait_synced(); each after a full GC
--   memory NS [metadata]
--                an informer only (so no LIST's garbage is in the heap;
--                with "metadata", a metadata-only one):
--                VmRSS and the Lua heap before start() and after
--                wait_synced(), read once before a full GC and once after
--                it; then the average compact JSON size of a cached object
local core = require "luaop.core"
local luaop = require "luaop"
local informer = require "luaop.informer"

local mode, ns, n = arg[1], arg[2], tonumber(arg[3])
local c = luaop.client()
local function out(name, v) print(("%s %s"):format(name, v)) end

if mode == "create" then
  local creator = require "bench.creator"
  local nns = tonumber(arg[5])
  for i = 0, (nns or 0) - 1 do
    local _, err = c:create { apiVersion = "v1", kind = "Namespace",
      metadata = { name = ns .. "-" .. i, labels = { ["bench-shard"] = ns } } }
    if err and not luaop.is_error(err, "AlreadyExists") then error(err) end
  end
  local seconds, failed = creator.create(c, tonumber(arg[4]) or 1, n, function(i)
    local payload = creator.payload()
    return { apiVersion = "v1", kind = "ConfigMap",
      metadata = { name = ("cm-%06d"):format(i), namespace = nns and ns .. "-" .. (i % nns) or ns,
        labels = { bench = "cache" } },
      data = { a = payload:sub(1, 400), b = payload:sub(401) } }
  end)
  out("create_s", ("%.3f"):format(seconds))
  return failed == 0 and 0 or 1
end

local function rss_kib()
  local f = assert(io.open("/proc/self/status"))
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)"))
end

local base = ("/api/v1/namespaces/%s/configmaps?limit=500"):format(ns)
local function escape(s) return (s:gsub("[^%w%-%._~]", function(ch) return ("%%%02X"):format(ch:byte()) end)) end

-- One paged LIST; decode: a function applied to each page's body. Returns
-- items, pages.
local function raw_list(decode)
  local continue, items, pages = nil, 0, 0
  repeat
    local path = base .. (continue and "&continue=" .. escape(continue) or "")
    local status, body = core.api.request { method = "GET", path = path }
    assert(status == 200, body)
    pages = pages + 1
    -- the list's metadata comes before its items
    local head = body:sub(1, body:find('"items":', 1, true) or 4096)
    continue = head:match('"continue":"([^"]*)"')
    local at = 1
    while true do -- count items without decoding: one uid each
      at = body:find('"uid":"', at, true)
      if not at then break end
      items, at = items + 1, at + 7
    end
    if decode then decode(body) end
  until not continue or continue == ""
  return items, pages
end

local function timed(name, fn)
  collectgarbage("collect")
  local t0 = luaop.time.monotonic()
  local a, b = fn()
  local dt = luaop.time.monotonic() - t0
  out(name, ("%.4f"):format(dt))
  return a, b
end

local function sync()
  local inf = informer.new("v1/ConfigMap", { namespace = ns, client = c, metadata_only = arg[3] == "metadata" })
  inf:start()
  inf:wait_synced()
  return inf
end

if mode == "time" then
  assert(c:resolve("v1/ConfigMap")) -- the informer's discovery, warmed up
  local items, pages = raw_list() -- warm-up: the connection, the API server's cache
  out("items", items)
  out("pages", pages)
  timed("list_raw_s", raw_list)
  timed("list_decoded_s", function() return raw_list(core.json.decode) end)
  local inf = timed("sync_s", sync)
  assert(inf.count == items, ("informer has %d objects, the list %d"):format(inf.count, items))
  inf:stop()
  return 0
end

if mode == "memory" then
  assert(c:get("ConfigMap", "kube-root-ca.crt", ns)) -- discovery and the connection warmed up
  local before_nogc, heap_before_nogc = rss_kib(), collectgarbage("count")
  collectgarbage("collect")
  local before, heap_before = rss_kib(), collectgarbage("count")
  local t0 = luaop.time.monotonic()
  local inf = sync()
  out("sync_alone_s", ("%.4f"):format(luaop.time.monotonic() - t0))
  local after_nogc, heap_after_nogc = rss_kib(), collectgarbage("count")
  collectgarbage("collect")
  local after, heap_after = rss_kib(), collectgarbage("count")
  inf:stop()
  -- what one cached object is as compact JSON (managedFields were cut):
  -- the store's own text (luaop.informer.cache)
  local bytes, keys = 0, 0
  for k, text in pairs(inf.store) do bytes, keys = bytes + #text, keys + #k end
  local count = inf.count
  out("objects", count)
  out("json_bytes", ("%.1f"):format(bytes / count))
  out("rss_before_kib", before)
  out("rss_after_kib", after)
  out("rss_per_obj", ("%.1f"):format((after - before) * 1024 / count))
  out("rss_per_obj_nogc", ("%.1f"):format((after_nogc - before_nogc) * 1024 / count))
  out("lua_per_obj", ("%.1f"):format((heap_after - heap_before) * 1024 / count))
  out("lua_per_obj_nogc", ("%.1f"):format((heap_after_nogc - heap_before_nogc) * 1024 / count))
  -- where the Lua heap's bytes go (lstring.h, ltable.c: a string is a
  -- 24-byte header and its bytes and a zero; the store's hash part is a
  -- power of two of 24-byte slots)
  local slots = 1
  while slots < count do slots = slots * 2 end
  out("text_string_b", ("%.1f"):format(24 + bytes / count + 1))
  out("key_string_b", ("%.1f"):format(24 + keys / count + 1))
  out("store_slot_b", ("%.1f"):format(slots * 24 / count))
  return 0
end

error("mode: create, time or memory")
