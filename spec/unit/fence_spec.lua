-- The leader election's fence, by request: while this process does not
-- hold the lease, no write leaves it but the election's own create, renew
-- and release of its Lease (made with the key core.api.fence hands out,
-- which no script reaches). A script's write to that very Lease is fenced
-- like any other. Against the fake API server, which keeps Leases and logs
-- every request that arrives.
local luaop = require "support.luaop"
local fake = require "support.fake"
local volume = require "support.volume"
local kube = require "support.kube"
local json = require("luaop.core").json

-- A script whose top level starts a task that writes the election's Lease
-- every way a client can, and prints what each write answered.
local intruder = [[
local luaop = require "luaop"
local LEASE = "coordination.k8s.io/v1/Lease"
luaop.spawn(function()
  local c = luaop.client()
  local req = { namespace = "default", name = "spec-lease" }
  local cur, gerr = c:get(LEASE, req)
  print("GET " .. (cur and cur.spec.holderIdentity or tostring(gerr)))
  if cur then
    cur.spec.holderIdentity = "intruder"
    local _, err = c:update(cur)
    print("PUT " .. tostring(err))
  end
  local _, perr = c:patch(LEASE, req, { spec = { holderIdentity = "intruder" } })
  print("PATCH " .. tostring(perr))
  local _, derr = c:delete(LEASE, req)
  print("DELETE " .. tostring(derr))
  local _, cerr = c:create { apiVersion = "coordination.k8s.io/v1", kind = "Lease",
    metadata = { name = "spec-lease", namespace = "default" }, spec = { holderIdentity = "intruder" } }
  print("POST " .. tostring(cerr))
  print("intruder done")
end)
return luaop.controller { name = "fence-probe", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function() end }
]]

local LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"

-- The writes that reached the fake server's Leases, as "METHOD PATH".
local function lease_writes(server)
  local out = {}
  for _, l in ipairs(server.requests()) do
    local method, path = l:match("^(%u+) (%S+) write$")
    if method and path:sub(1, #LEASES) == LEASES then out[#out + 1] = method .. " " .. path end
  end
  return out
end

-- A script whose task writes a ConfigMap every 0.1 s, whatever each write
-- answers (the fake server refuses them: they arrived).
local writer = [[
local luaop = require "luaop"
luaop.spawn(function()
  local c = luaop.client()
  while true do
    c:patch("v1/ConfigMap", { namespace = "default", name = "cm-w" }, { data = { k = "v" } })
    luaop.sleep(0.1)
  end
end)
return luaop.controller { name = "writer", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function() end }
]]

describe("leader election's fence", function()
  it("refuses a script's PUT, PATCH, DELETE and create of the election Lease while fenced, and lets the "
    .. "election's own create and renew out", function()
    local server = fake.start()
    finally(server.stop)
    server.control("hold-lease/spec-lease") -- another process leads: this one is fenced
    local v = volume.new { ["intruder.lua"] = intruder }
    finally(function() v:remove() end)
    local run = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig, flags = {
      "--leader-elect", "--leader-election-id", "spec-lease", "--leader-election-namespace", "default",
      "--leader-elect-lease-duration", "15s", "--leader-elect-renew-deadline", "2s",
      "--leader-elect-retry-period", "0.5s" } })
    finally(run.cleanup)
    local out = kube.wait_for("the intruder's writes answered", 20, function()
      local o = run.stdout()
      return o:find("intruder done", 1, true) and o
    end)
    -- it read the Lease (reads leave), and every write failed, fenced
    assert.matches("GET another", out, 1, true)
    for _, m in ipairs { "PUT", "PATCH", "DELETE", "POST" } do
      assert.matches(m .. " TransportError: not sent: this process does not hold the leader election lease",
        out, 1, true)
    end
    -- and nothing reached the server: not one write to the Leases
    assert.are.same({}, lease_writes(server))
    -- the lease goes free: the election's own create and renews leave
    server.control("drop-lease/spec-lease")
    kube.wait_for("the lease acquired", 20, function()
      return run.stderr():find("successfully acquired lease", 1, true)
    end)
    local writes = kube.wait_for("a renew", 20, function()
      local w = lease_writes(server)
      return #w >= 2 and w
    end)
    assert.are.equal("POST " .. LEASES, writes[1])
    for i = 2, #writes do assert.are.equal("PUT " .. LEASES .. "/spec-lease", writes[i]) end
    run.stop(0)
  end)

  it("closes at the renew deadline from the last acquire or renewal sent while renewals stall, before the "
    .. "election is given up", function()
    -- lease 20 s, renew deadline 2 s, retry 1.5 s: a stalled renewal (its
    -- GET answered 30 s late) times out 2 s after it was sent, 3.5 s after
    -- the last success sent, and only then is the election given up. The
    -- fence closes at 2 s: the script's writes stop arriving by then. Once
    -- stalled right after the acquire, once after a renewal.
    local RENEW = 2
    for _, after in ipairs { "POST", "PUT" } do
      local server = fake.start()
      finally(server.stop)
      local v = volume.new { ["writer.lua"] = writer }
      finally(function() v:remove() end)
      local run = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig, exit = 1, flags = {
        "--leader-elect", "--leader-election-id", "spec-lease", "--leader-election-namespace", "default",
        "--leader-elect-lease-duration", "20s", "--leader-elect-renew-deadline", RENEW .. "s",
        "--leader-elect-retry-period", "1.5s" } })
      finally(run.cleanup)
      local function cm_writes()
        local t = {}
        for _, w in ipairs(json.decode(server.control("writes"))) do
          if w[2]:find("/configmaps/cm-w", 1, true) then t[#t + 1] = w[3] end
        end
        return t
      end
      -- the times the acquire (POST) or renewals (PUT) were answered
      local function successes()
        local t = {}
        for _, e in ipairs(json.decode(server.control("lease-log"))) do
          if e[1] == after then t[#t + 1] = e[3] end
        end
        return t
      end
      kube.wait_for("the " .. after .. " and the script's writes", 20, function()
        return #successes() >= 1 and #cm_writes() >= 3
      end)
      server.control("delay-lease/spec-lease?delay=30")
      kube.wait_for("the election given up", 20, function()
        return run.stderr():find("leader election lost", 1, true)
      end)
      local ok, arrived = successes(), cm_writes()
      local last_ok, last_write = ok[#ok], arrived[#arrived]
      if after == "POST" then
        for _, e in ipairs(json.decode(server.control("lease-log"))) do
          assert.are_not.equal("PUT", e[1], "a renewal came before the stall")
        end
      end
      -- (the fence runs from when the request was sent, before its answer)
      assert.is_true(last_write <= last_ok + RENEW + 0.3, ("after the %s: a write arrived %.2f s after its answer, "
        .. "past the renew deadline of %d s"):format(after, last_write - last_ok, RENEW))
      -- and the script wrote until the fence closed (the check is not empty)
      assert.is_true(last_write >= last_ok + RENEW - 0.8, ("after the %s: the last write arrived %.2f s after it")
        :format(after, last_write - last_ok))
      kube.wait_for("luaop to exit", 20, run.exited)
      assert.are.equal(1, run.stop(false))
      assert.are.equal(#arrived, #cm_writes(), "a write arrived after the election was given up")
    end
  end)

  it("cuts a write off when it closes while the write's body is still on its way: the server never gets the "
    .. "whole body, and the write fails, fenced", function()
    -- A leader stopped (SIGSTOP) between a write's headers and its body,
    -- which curl sends in a later turn of the loop, sent the body on
    -- resuming, long past its lease: the write landed. Here the server
    -- takes the body (24 MiB: more than the sockets hold) 2 s after the
    -- headers, and the fence closes 1 s after they left.
    local server = fake.start()
    finally(server.stop)
    server.control("slow-body?delay=2")
    local code, out, err = luaop.run([[
      local core = require "luaop.core"
      local api = core.api
      api.fence("/apis/coordination.k8s.io/v1/namespaces/default/leases/spec-lease")
      api.fence_until(core.task.now() + 1)
      local status, text = api.request { method = "PATCH", path = "/api/v1/namespaces/default/configmaps/big",
        body = '{"data":{"big":"' .. string.rep("x", 24 << 20) .. '"}}',
        content_type = "application/merge-patch+json", timeout = 30 }
      print("answer", status, text)
    ]], { kubeconfig = server.kubeconfig })
    assert.are.equal(0, code, err)
    assert.matches("answer\tnil\tnot sent: this process does not hold the leader election lease", out)
    local got, len
    kube.wait_for("the server's read of the body", 10, function()
      for _, l in ipairs(server.requests()) do
        got, len = l:match("^PATCH /api/v1/namespaces/default/configmaps/big body (%d+)/(%d+)$")
        if got then return true end
      end
    end)
    assert.is_true(tonumber(got) < tonumber(len), ("the server got %s bytes of %s"):format(got, len))
  end)
end)
