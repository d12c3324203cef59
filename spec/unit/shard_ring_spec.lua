-- Sharding in luaop processes against the fake API server, which keeps
-- Leases (docs/sharding.md): rings of replicas divide the space, hand it
-- over without overlap and take a killed member's part over; the handover
-- protocol's order, driven by hand; the fence by range (a write made for a
-- key leaves only while its hash is held); a watch and an informer
-- filtered by ranges. Its work is done by the programs it starts, so the
-- valgrind pass leaves it out (spec/run.sh); spec/unit/shard_spec.lua has
-- the parts that run in the spec runner.
local core = require "luaop.core"
local ranges = require "luaop.shard.ranges"
local luaop = require "support.luaop"
local fake = require "support.fake"
local volume = require "support.volume"
local kube = require "support.kube"
local json = core.json

local partition = require("support.shard").partition

-- A ConfigMap controller that prints each key it reconciles.
local printer = [[
local luaop = require "luaop"
return luaop.controller { name = "printer", resource = "v1/ConfigMap", namespace = "default", shard_by = "uid",
  reconcile = function(ctx, req) print("reconciled " .. req.name) end }
]]

local SHARD_FLAGS = { "--shard-ring", "spec", "--shard-namespace", "default", "--leader-elect-lease-duration", "3s",
  "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "0.5s" }

-- The ring's Leases on the fake server: identity -> its ranges (live ones).
local function members(server)
  local out = {}
  for _, l in ipairs(json.decode(server.control("leases"))) do
    local labels = l.metadata.labels or {}
    if labels["luaop.dev/shard-ring"] == "spec" and l.spec.holderIdentity ~= "" then
      out[l.spec.holderIdentity] = ranges.decode(l.metadata.annotations["luaop.dev/shard-ranges"])
    end
  end
  return out
end

local function all_held(server, n)
  local m = members(server)
  local sets, k = {}, 0
  for _, s in pairs(m) do
    if #s == 0 then return false end -- (a member still waiting for its part)
    k = k + 1
    sets[#sets + 1] = s
  end
  return k == n and partition(sets) and m
end

describe("shard ring of luaop processes", function()
  it("divides the space between two replicas, hands it over from one to the next without overlap, and takes a "
    .. "killed member's part over within a lease duration", function()
    local server = fake.start()
    finally(server.stop)
    local v = volume.new { ["printer.lua"] = printer }
    finally(function() v:remove() end)
    local a = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig, flags = SHARD_FLAGS, exit = false })
    finally(a.cleanup)
    -- alone, it holds everything, and reconciles every key
    kube.wait_for("one member holding the space", 20, function() return all_held(server, 1) end)
    kube.wait_for("the five ConfigMaps reconciled", 20, function()
      local n = 0
      for _ in a.stdout():gmatch("reconciled cm%-%d") do n = n + 1 end
      return n >= 5
    end)
    local b = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig, flags = SHARD_FLAGS, exit = false })
    finally(b.cleanup)
    local two = kube.wait_for("two members dividing the space", 30, function() return all_held(server, 2) end)
    for id, set in pairs(two) do
      local share = ranges.share(set)
      assert.is_true(share > 0.1 and share < 0.9, ("%s holds %.3f"):format(id, share))
    end
    -- the handover: the first released before the second acquired
    -- (each line as soon as its process has written it: the Leases can
    -- show the handover before the spec reads a log that says so)
    local ok_r, released = pcall(kube.wait_for, "the first's release logged", 10, function()
      return a.stderr():match("(%d%d:%d%d:%d%d%.%d+)[^\n]*released ranges")
    end)
    assert.is_true(ok_r, "no release logged:\n" .. a.stderr())
    local ok_a, acquired = pcall(kube.wait_for, "the second's acquire logged", 10, function()
      return b.stderr():match("(%d%d:%d%d:%d%d%.%d+)[^\n]*acquired ranges")
    end)
    assert.is_true(ok_a, "no acquire logged:\n" .. b.stderr())
    assert.is_true(released <= acquired, ("released %s, acquired %s"):format(released, acquired))
    -- SIGKILL the first: the second holds everything within a lease
    -- duration (3 s) and a retry period, and some slack
    a.signal("KILL")
    local t0 = os.time()
    kube.wait_for("the survivor holding the space", 10, function()
      for _, set in pairs(members(server)) do
        if ranges.equal(set, ranges.ALL) then return true end
      end
      return false
    end)
    assert.is_true(os.time() - t0 <= 8)
    b.stop(0)
    -- a clean stop leaves the ring: holder "" and no ranges (the killed
    -- member's Lease stays as it was, expired)
    local bid = b.stderr():match('"identity": "([^"]+)"')
    assert.is_truthy(bid)
    assert.is_nil(members(server)[bid])
    assert.matches("left the shard ring", b.stderr(), 1, true)
  end)
end)

describe("shard ring with a controller that must run once", function()
  it("runs a controller of shard_by none on one replica only, whatever the keys", function()
    local server = fake.start()
    finally(server.stop)
    local v = volume.new { ["once.lua"] = [[
local luaop = require "luaop"
return luaop.controller { name = "once", resource = "v1/ConfigMap", namespace = "default", shard_by = "none",
  reconcile = function(ctx, req) print("reconciled " .. req.name) return luaop.requeue_after(0.1) end }
]] }
    finally(function() v:remove() end)
    local a = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig, flags = SHARD_FLAGS })
    finally(a.cleanup)
    local b = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig, flags = SHARD_FLAGS })
    finally(b.cleanup)
    kube.wait_for("two members dividing the space", 30, function() return all_held(server, 2) end)
    local function n(run) return select(2, run.stdout():gsub("reconciled", "")) end
    local na, nb = n(a), n(b)
    -- from here, 20 more reconciles, all by one of them
    kube.wait_for("20 reconciles more", 20, function() return n(a) + n(b) >= na + nb + 20 end)
    local ma, mb = n(a) - na, n(b) - nb
    assert.is_true((ma == 0) ~= (mb == 0), ("%d and %d reconciles"):format(ma, mb))
  end)
end)

-- The start of a program that drives members of a ring by hand, in one
-- process against the fake API server, the fence left out (it is the
-- process's; this is the protocol alone): `seen.request(spec, status)` and
-- `seen.fence(set)` are told of each request and fence; `new(ring, id,
-- opts)` makes a member (lease 3 s, renew deadline 2 s, retry 0.2 s);
-- `ring_lease(ring, id, holder, ranges, age)` writes another member's
-- Lease as it is seen now, its renewTime age seconds old.
local PROTOCOL = [[
local core = require "luaop.core"
local json, api = core.json, core.api
local member = require "luaop.shard.member"
local ranges = require "luaop.shard.ranges"
local real = api.request
local seen = { request = function() end, fence = function() end }
api.request = function(spec)
  spec.lease = nil
  local status, body = real(spec)
  seen.request(spec, status)
  return status, body
end
api.fence = function() return {} end
api.fence_until = function() end
core.shard.fence = function(set) seen.fence(set) end
local function new(ring, id, opts)
  local o = { ring = ring, namespace = "default", identity = id, lease_duration = 3, renew_deadline = 2,
    retry_period = 0.2, drain = function() end, gained = function() end, spanned = function() end }
  for k, v in pairs(opts or {}) do o[k] = v end
  return member.new(o)
end
local function ring_lease(ring, id, holder, set, age)
  local t = os.date("!%Y-%m-%dT%H:%M:%S.000000Z", os.time() - (age or 0))
  return real { method = "POST", path = "/apis/coordination.k8s.io/v1/namespaces/default/leases",
    content_type = "application/json", body = json.encode { apiVersion = "coordination.k8s.io/v1", kind = "Lease",
      metadata = { name = member.lease_name(ring, id), namespace = "default",
        labels = { ["luaop.dev/shard-ring"] = ring }, annotations = { ["luaop.dev/shard-ranges"] = set } },
      spec = { holderIdentity = holder, leaseDurationSeconds = 1, renewTime = t, acquireTime = t } } }
end
]]

describe("shard ring handover", function()
  it("drains the reconciles of a released range before its fence closes, and closes it before the Lease stops "
    .. "listing it", function()
    local server = fake.start()
    finally(server.stop)
    -- one member alone, then another's Lease appears: the first releases
    -- about half; what happens in which order is recorded
    local program = PROTOCOL .. [[
local log = {}
local PATH = "/apis/coordination.k8s.io/v1/namespaces/default/leases/order-a-1"
seen.request = function(spec, status)
  if spec.method == "PUT" and spec.path == PATH and status == 200 then
    local l = json.decode(spec.body)
    log[#log + 1] = "lease " .. (ranges.equal(ranges.decode(l.metadata.annotations["luaop.dev/shard-ranges"]),
      ranges.ALL) and "all" or "part")
  end
end
seen.fence = function(set) log[#log + 1] = "fence " .. (ranges.equal(set, ranges.ALL) and "all" or "part") end
local a = new("order", "a_1", { drain = function(set) log[#log + 1] = "drain " .. (#set > 0 and "some" or "none") end })
assert(a:round()) -- alone: it holds everything
assert(a:round())
-- b joins (a Lease of the ring, renewed now, listing nothing; 30 s)
local status = ring_lease("order", "b_2", "b_2", "")
assert(status == 201)
assert(a:round())
print(table.concat(log, ","))
]]
    local out = luaop.ok(program, { kubeconfig = server.kubeconfig })
    -- joined (nothing claimed), then alone: the claim written before the
    -- fence opens; then the release: drained, fenced
    -- shut, and only then written
    assert.matches("fence part,lease all,fence all,drain some,fence part,lease part", out, 1, true)
  end)
end)

describe("shard ring member paused past its renew deadline", function()
  it("never writes its Lease again, even when the write would succeed", function()
    local server = fake.start()
    finally(server.stop)
    local program = PROTOCOL .. [[
local puts = 0
seen.request = function(spec) if spec.method ~= "GET" then puts = puts + 1 end end
local a = new("pause", "a_1")
assert(a:round())
assert(a:round())
local before = puts
a.last = core.task.now() - 2.5 -- as after a pause of 2.5 s since its last renewal
print("round " .. tostring(a:round()) .. ", writes " .. (puts - before) .. ", lapsed " .. tostring(a:lapsed()))
]]
    local out = luaop.ok(program, { kubeconfig = server.kubeconfig })
    assert.matches("round false, writes 0, lapsed true", out, 1, true)
  end)
end)

describe("shard ring member", function()
  it("deletes the Lease of a member that left a lease duration ago, and of one unchanged for ten", function()
    local server = fake.start()
    finally(server.stop)
    local program = PROTOCOL .. [[
assert(ring_lease("forget", "left", "", "") == 201) -- left the ring (holder "")
assert(ring_lease("forget", "dead", "dead", "0-ff") == 201) -- never renewed again
assert(ring_lease("forget", "live", "live", "100-1ff") == 201)
local a = new("forget", "a_1")
local function names()
  local _, body = real { path = "/apis/coordination.k8s.io/v1/namespaces/default/leases?labelSelector=luaop.dev%2Fshard-ring%3Dforget" }
  local out = {}
  for _, l in ipairs(json.decode(body).items) do out[#out + 1] = l.metadata.name end
  table.sort(out)
  return table.concat(out, " ")
end
local live = 0
local t0 = core.task.now()
-- "live" renews every round: it stays; "left" goes after its lease
-- duration (1 s) as a_1 observes it, "dead" after ten (10 s)
local after_left, after_dead
while core.task.now() - t0 < 13 do
  assert(a:round())
  live = live + 1
  local _, cur = real { path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/forget-live" }
  cur = json.decode(cur)
  cur.spec.renewTime = ("%d"):format(live)
  assert(real { method = "PUT", path = "/apis/coordination.k8s.io/v1/namespaces/default/leases/forget-live",
    content_type = "application/json", body = json.encode(cur) } == 200)
  local n = names()
  if not after_left and not n:find("forget-left", 1, true) then after_left = core.task.now() - t0 end
  if not after_dead and not n:find("forget-dead", 1, true) then after_dead = core.task.now() - t0 end
  core.task.sleep(0.2)
end
print(("left gone after %.1f s, dead gone after %.1f s, still: %s"):format(after_left or -1, after_dead or -1, names()))
]]
    local out = luaop.ok(program, { kubeconfig = server.kubeconfig })
    local left, dead = out:match("left gone after ([%d.]+) s, dead gone after ([%d.]+) s")
    assert.is_truthy(left, out)
    assert.is_true(tonumber(left) >= 1 and tonumber(left) < 3, out)
    assert.is_true(tonumber(dead) >= 10 and tonumber(dead) < 12, out)
    assert.matches("still: forget-a-1 forget-live", out, 1, true)
  end)
end)

describe("shard ring members claiming at once", function()
  it("never hold one range both, and divide the space once they see each other", function()
    local server = fake.start()
    finally(server.stop)
    -- two members in one process (the fence, which is the process's, left
    -- out: this is the protocol alone). Both join; then a round of each at
    -- once, made a race on purpose: both read the ring before either
    -- writes its claim, and a's read misses b (a view from before b
    -- joined), so a claims the whole space while b claims its part. Only
    -- the read after the claim keeps them from both holding b's part.
    local program = PROTOCOL .. [[
local a, b = new("race", "a_1"), new("race", "b_2")
assert(a:round() and b:round()) -- (the first round only joins)
local arrived, both = 0, core.task.cond()
local function racing(m, hide)
  local read, n = m.read, 0
  m.read = function(self)
    n = n + 1
    local others, mine = read(self)
    if n == 1 then
      if others and hide then
        local kept = {}
        for _, x in ipairs(others) do if x.identity ~= hide then kept[#kept + 1] = x end end
        others = kept
      end
      arrived = arrived + 1
      both:signal()
      while arrived < 2 do both:wait() end
    end
    return others, mine
  end
  return function() m.read = read end
end
local ua, ub = racing(a, "b_2"), racing(b, nil)
local ta = core.task.spawn(function() return a:round() end)
local tb = core.task.spawn(function() return b:round() end)
ta:wait() tb:wait()
ua() ub()
local overlap = #ranges.intersect(a.held, b.held) > 0
print(("raced: a %.3f, b %.3f"):format(ranges.share(a.held), ranges.share(b.held)))
for i = 1, 30 do
  a.backoff_until, b.backoff_until = 0, 0
  local t1 = core.task.spawn(function() return a:round() end)
  local t2 = core.task.spawn(function() return b:round() end)
  t1:wait() t2:wait()
  if #ranges.intersect(a.held, b.held) > 0 then overlap = true end
  if ranges.equal(ranges.union(a.held, b.held), ranges.ALL) and #a.held > 0 and #b.held > 0 then
    print("divided after " .. i .. " rounds")
    break
  end
end
print("overlap " .. tostring(overlap))
]]
    local out = luaop.ok(program, { kubeconfig = server.kubeconfig })
    assert.matches("overlap false", out, 1, true)
    assert.matches("divided after %d+ rounds", out)
  end)
end)

describe("shard fence", function()
  it("lets a write made for a key out only while its hash is held, and says why when not", function()
    local server = fake.start()
    finally(server.stop)
    local program = [[
local core = require "luaop.core"
local api = core.api
api.fence("/apis/coordination.k8s.io/v1/namespaces/default/leases/member")
api.fence_until(core.task.now() + 60)
local h = core.shard.hash("default")
local function write(name)
  local t = core.task.spawn_limited({ instructions = 10000000, shard = h }, function()
    -- a task the reconcile's task spawns carries its mark too
    local inner = core.task.spawn(function()
      return api.request { method = "PATCH", path = "/api/v1/namespaces/default/configmaps/" .. name,
        body = "{}", content_type = "application/merge-patch+json" }
    end)
    local _, status, err = inner:wait()
    return status, err
  end)
  local _, status, err = t:wait()
  print(name, tostring(status), tostring(err))
end
core.shard.fence {}
write("none-held")
core.shard.fence { { h, h } }
write("held")
core.shard.fence { { h + 1, -1 } }
write("other-held")
-- a write not made for a key needs only the membership
local status = api.request { method = "PATCH", path = "/api/v1/namespaces/default/configmaps/unkeyed", body = "{}",
  content_type = "application/merge-patch+json" }
print("unkeyed", tostring(status))
]]
    local out = luaop.ok(program, { kubeconfig = server.kubeconfig })
    assert.matches("none%-held\tnil\tnot sent: this replica does not hold the shard of the reconcile's key %(fenced%)",
      out)
    assert.matches("held\t405", out)
    assert.matches("other%-held\tnil\tnot sent: this replica does not hold the shard", out)
    assert.matches("unkeyed\t405", out)
    local arrived = {}
    for _, w in ipairs(json.decode(server.control("writes"))) do arrived[#arrived + 1] = w[2]:match("[^/]+$") end
    assert.are.same({ "held", "unkeyed" }, arrived)
  end)
end)

describe("shard filter before decoding", function()
  it("leaves a watch's events of other namespaces out as they arrive, never queued or decoded, and counts them",
    function()
      local server = fake.start()
      finally(server.stop)
      local program = [[
local core = require "luaop.core"
local function lines(set)
  local w = core.api.watch { path = "/api/v1/namespaces/default/configmaps?watch=true&labelSelector=spread",
    shard = set }
  local got = {}
  for line in function() return w:next() end do
    got[#got + 1] = core.json.peek(line, "object", "metadata", "name") or core.json.peek(line, "type")
  end
  print(table.concat(got, ","), w:dropped())
end
local function one(ns) local h = core.shard.hash(ns) return { { h, h } } end
lines(one("default"))
lines(one("elsewhere"))
lines({})
lines(nil)
]]
      local out = luaop.ok(program, { kubeconfig = server.kubeconfig })
      -- the BOOKMARK and the escaped namespace always go on to be decoded
      assert.are.equal(table.concat({
        "plain,escaped,BOOKMARK\t1", "deep,escaped,BOOKMARK\t1", "escaped,BOOKMARK\t2",
        "plain,deep,escaped,BOOKMARK\t0" }, "\n") .. "\n", out)
    end)
end)

describe("a watch's events taken apart where they lie", function()
  it("hands what json.event makes of each line (type, object, text), or false and the line it does not take, "
    .. "for each line next would hand", function()
    local server = fake.start()
    finally(server.stop)
    local out = luaop.ok([[
local core = require "luaop.core"
local path = "/api/v1/namespaces/default/configmaps?watch=true&labelSelector=spread"
local lines, w = {}, core.api.watch { path = path }
for line in function() return w:next() end do lines[#lines + 1] = line end
local got, i = {}, 0
w = core.api.watch { path = path }
while true do
  local typ, obj, text = w:next_event(nil, true)
  if typ == nil then break end
  i = i + 1
  local et, eo, ex = core.json.event(lines[i], nil, true)
  if typ then
    got[#got + 1] = ("%s:%s:%s"):format(typ, typ == et and core.json.encode(obj) == core.json.encode(eo) and text == ex,
      obj.data == nil)
  else
    got[#got + 1] = ("line:%s:%s"):format(obj == lines[i], et == nil)
  end
end
print(table.concat(got, ","), i == #lines)
]], { kubeconfig = server.kubeconfig })
    -- each shallow (its metadata alone) but deep, too deep to decode: its
    -- line, which the caller decodes whole to say what is wrong with it
    assert.are.equal("ADDED:true:true,line:true:true,MODIFIED:true:true,BOOKMARK:true:true\ttrue\n", out)
  end)
end)

describe("sharded informer", function()
  it("lists again, streaming, when its ranges grow in the middle of its first sync, and misses nothing", function()
    local server = fake.start()
    finally(server.stop)
    local out, err = luaop.ok([[
local luaop = require "luaop"
local core = require "luaop.core"
local informer = require "luaop.informer"
local ishard = require "luaop.informer.shard"
local inf = informer.new("ConfigMap", { namespace = "default", label_selector = "slowstream" })
ishard.attach(inf)
local h = core.shard.hash("default")
-- at first the ranges hold another namespace only: the stream's objects
-- are left out
ishard.set(inf, { { h + 1, h + 1 } })
inf:start()
-- some of the ten streamed (and left out), then the ranges grow to hold
-- "default"
local deadline = luaop.time.monotonic() + 10
while not (inf.watching and inf.watching.raw:dropped() >= 2) and luaop.time.monotonic() < deadline do
  luaop.sleep(0.01)
end
assert(inf.watching and inf.watching.raw:dropped() >= 2, "the stream did not start")
ishard.set(inf, { { h, h + 1 } })
inf:wait_synced()
local names = {}
for _, o in ipairs(inf:list()) do names[#names + 1] = o.metadata.name end
table.sort(names)
print(#names, table.concat(names, ","))
inf:stop()
]], { kubeconfig = server.kubeconfig })
    assert.matches("^10\ts%-0,s%-1,s%-2,s%-3,s%-4,s%-5,s%-6,s%-7,s%-8,s%-9\n", out, 1, false, err)
    -- two streams, the second with the wider ranges; no LIST in pages
    -- (the probe of one item aside): a stream ended on purpose is no failure
    local streams, pages = 0, 0
    for _, line in ipairs(server.requests()) do
      local q = line:match("^GET /api/v1/namespaces/default/configmaps%?(%S*)")
      if q and q:find("sendInitialEvents=true", 1, true) then streams = streams + 1 end
      if q and not q:find("watch=", 1, true) and not q:find("limit=1&", 1, true) and not q:find("limit=1$") then
        pages = pages + 1
      end
    end
    assert.are.equal(2, streams)
    assert.are.equal(0, pages)
    assert.not_matches("streaming the list failed", err)
    assert.not_matches("list/watch failed", err)
  end)
end)

describe("sharded informer of an owned or watched kind", function()
  it("stays whole when the controller's resource or the kind is cluster-scoped, and is sharded when both are "
    .. "namespaced", function()
    local server = fake.start()
    finally(server.stop)
    local out, err = luaop.ok([[
local ishard = require "luaop.informer.shard"
local namespaced = { ["v1/Namespace"] = false, ["v1/Secret"] = true, ["v1/ConfigMap"] = true }
local client = { resolve = function(_, kind) return { namespaced = namespaced[kind] } end }
-- owner: the controller's resource, then the kind
for _, owner in ipairs { { "v1/Namespace", "v1/Secret" }, { "v1/ConfigMap", "v1/Namespace" },
    { "v1/ConfigMap", "v1/Secret" } } do
  local inf = { client = client, opts = {}, log = { info = function() end } }
  ishard.attach(inf, owner)
  ishard.set(inf, {}) -- (no ranges: nothing to ask the server)
  ishard.before_sync(inf)
  print(table.concat(owner, " "), inf.shard and "sharded" or "whole", inf.keep and "filtered" or "kept")
end
]], { kubeconfig = server.kubeconfig })
    assert.are.equal("v1/Namespace v1/Secret\twhole\tkept\n"
      .. "v1/ConfigMap v1/Namespace\twhole\tkept\n"
      .. "v1/ConfigMap v1/Secret\tsharded\tfiltered\n", out, err)
  end)
end)

describe("shard filter's count", function()
  it("is one series per resource, whether C left an object out before decoding or Lua after", function()
    local server = fake.start()
    finally(server.stop)
    local out, err = luaop.ok([[
local core = require "luaop.core"
local informer = require "luaop.informer"
local ishard = require "luaop.informer.shard"
-- the kind as a script may name it, bare
local inf = informer.new("ConfigMap", { namespace = "default", label_selector = "slowstream" })
ishard.attach(inf)
local h = core.shard.hash("default")
ishard.set(inf, { { h + 1, h + 1 } }) -- not "default": the stream's ten are left out in C
inf:start()
inf:wait_synced()
-- one the C side could not judge, judged in Lua
inf:upsert({ metadata = { name = "late", namespace = "default", uid = "u-late" } })
for line in core.metrics.text():gmatch("[^\n]+") do
  if line:find("^luaop_shard_objects_filtered_total{") then print(line) end
end
inf:stop()
]], { kubeconfig = server.kubeconfig })
    assert.are.equal('luaop_shard_objects_filtered_total{resource="v1/ConfigMap"} 11\n', out, err)
  end)
end)

describe("shard ring's own requests", function()
  it("are not held behind the client's rate limiter, where a renewal would be late", function()
    local server = fake.start()
    finally(server.stop)
    -- one request a 2 s at most: five ordinary ones queue for 8 s; the
    -- member's read of the ring goes at once
    local program = [[
local core = require "luaop.core"
local api = core.api
local key = api.fence("/apis/coordination.k8s.io/v1/namespaces/default/leases/m")
local t0 = core.task.now()
for _ = 1, 5 do
  core.task.spawn(api.request, { path = "/api/v1/namespaces/default/configmaps/ok" })
end
local status = api.request { path = "/apis/coordination.k8s.io/v1/namespaces/default/leases", lease = key }
print(("lease read %s after %.1f s"):format(tostring(status), core.task.now() - t0))
local plain = api.request { path = "/api/v1/namespaces/default/configmaps/ok" }
print(("plain read %s after %.1f s"):format(tostring(plain), core.task.now() - t0))
]]
    local out = luaop.ok(program, { kubeconfig = server.kubeconfig, flags = { "--qps", "0.5", "--burst", "1" } })
    local lease_s = tonumber(out:match("lease read 200 after ([%d.]+) s"))
    local plain_s = tonumber(out:match("plain read 200 after ([%d.]+) s"))
    assert.is_truthy(lease_s, out)
    assert.is_true(lease_s < 1, out)
    assert.is_true(plain_s > 5, out) -- (the limiter does hold ordinary ones)
  end)
end)
