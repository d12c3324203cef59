-- The webhook server against bad clients, with a luaop that also runs a
-- controller against the local control plane and serves its probes: each
-- bad request gets a clear refusal, and none of it slows a reconcile or a
-- probe (the webhook server's thread and limits: src/tlsserve.h; the probe
-- server is another thread, the controllers the loop).
local kube = require "support.kube"
local luaop = require "support.luaop"
local proc = require "support.proc"
local volume = require "support.volume"

local q = proc.quote
local token = ("%d%04d"):format(os.time() % 100000000, math.random(0, 9999))

-- A controller stamping the ConfigMaps labelled with this run's token, and a
-- validating webhook of ConfigMaps (never registered with the API server:
-- the bad clients here call it directly).
local SCRIPT = ([[
local luaop = require "luaop"
return {
  luaop.controller {
    name = "stamp", resource = "v1/ConfigMap", label_selector = "faults=%s",
    reconcile = function(ctx, req)
      local cm = ctx:get("ConfigMap", req)
      if not cm or (cm.metadata.annotations or {}).seen then return end
      cm.metadata.annotations = cm.metadata.annotations or {}
      cm.metadata.annotations.seen = "yes"
      assert(ctx:update(cm))
    end,
  },
  luaop.webhook.validating {
    resource = "v1/ConfigMap",
    validate = function(req) if (req.object.data or {}).deny then return false, "no" end end,
  },
}
]]):format(token)

local REVIEW = [[{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u-1",
  "kind": {"group": "", "version": "v1", "kind": "ConfigMap"}, "resource": {"group": "", "version": "v1",
  "resource": "configmaps"}, "operation": "CREATE", "namespace": "default", "name": "x",
  "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"deny": "1"}}}}]]

describe("the webhook server against bad clients", function()
  local ns, dir, vol, run, port, probe

  setup(function()
    ns = kube.new_namespace("e2e-wh-faults")
    dir = proc.tempdir()
    assert(proc.sh(("hack/certs.sh %s >/dev/null"):format(q(dir .. "/pair"))))
    proc.write(dir, "review.json", REVIEW)
    vol = volume.new { ["faults.lua"] = SCRIPT }
    probe = proc.free_port("127.0.0.1")
    run = luaop.start({ vol.dir }, { flags = { "--namespace", ns, "--webhook-bind-address", "127.0.0.1:0",
      "--webhook-cert-path", dir .. "/pair", "--metrics-bind-address", "0",
      "--health-probe-bind-address", "127.0.0.1:" .. probe } })
    port = tonumber(kube.wait_for("the webhook server's port in the log", 30, function()
      return run.stderr():match('Starting webhook server.-"port": (%d+)')
    end))
  end)

  teardown(function()
    if run then
      run.stop()
      run.cleanup()
    end
    if vol then vol:remove() end
    if ns then kube.delete_namespace(ns) end
    if dir then os.execute("rm -rf " .. q(dir)) end
  end)

  local PATH = "/validate--v1-configmap"

  -- curl to the webhook server: the HTTP status and the body
  local function call(args)
    local ok, out = proc.sh(("curl -sS -m 10 --cacert %s -o %s -w '%%{http_code}' %s https://127.0.0.1:%d%s"):format(
      q(dir .. "/pair/ca.crt"), q(dir .. "/body"), args, port, PATH))
    assert(ok, out)
    return tonumber(out), proc.read(dir .. "/body")
  end

  -- a probe answered 200 within a second, and a ConfigMap stamped within 5 s
  local function unhurt(name)
    for _, p in ipairs { "/readyz", "/healthz" } do
      local ok, code = proc.sh(("curl -s -m 1 -o /dev/null -w '%%{http_code}' http://127.0.0.1:%d%s"):format(probe, p))
      assert.is_true(ok and code == "200", p .. " did not answer 200 within 1 s: " .. tostring(code))
    end
    kube.must({ "create", "-n", ns, "-f", "-" }, ([[{"apiVersion": "v1", "kind": "ConfigMap",
      "metadata": {"name": "%s", "labels": {"faults": "%s"}}}]]):format(name, token))
    kube.wait_for("ConfigMap " .. name .. " reconciled", 5, function()
      local cm = kube.get("configmap", name, ns)
      return cm and (cm.metadata.annotations or {}).seen == "yes"
    end)
  end

  it("refuses what is no admission review clearly: 400 for bad JSON or a review without a request, 415 for another "
    .. "content type, 405 for GET, 413 for a body over 8 MiB, Go's 400 for plain HTTP", function()
    local code, body = call("-H 'Content-Type: application/json' --data-binary @" .. q(dir .. "/review.json"))
    assert.are.equal(200, code) -- (the good one: denied in its review)
    assert.matches('"allowed":%s*false', body)
    code, body = call("-H 'Content-Type: application/json' --data-binary '{\"apiVersion\": '")
    assert.are.equal(400, code)
    assert.is_true(#body > 0)
    code = call("-H 'Content-Type: application/json' --data-binary '{\"kind\": \"AdmissionReview\"}'")
    assert.are.equal(400, code)
    code = call("-H 'Content-Type: text/plain' --data-binary @" .. q(dir .. "/review.json"))
    assert.are.equal(415, code)
    code = call("")
    assert.are.equal(405, code)
    assert(proc.sh(("head -c %d /dev/zero | tr '\\0' x >%s"):format(9 * 1024 * 1024, q(dir .. "/big"))))
    code = call("-H 'Content-Type: application/json' --data-binary @" .. q(dir .. "/big"))
    assert.are.equal(413, code)
    local ok, out = proc.sh(("curl -sS -m 5 http://127.0.0.1:%d%s"):format(port, PATH))
    assert(ok, out)
    assert.matches("Client sent an HTTP request to an HTTPS server", out, 1, true)
    unhurt("after-bad-requests")
  end)

  it("holds 300 idle connections at its limit and closes each within its timeouts, while reconciles and probes "
    .. "go on unhurt, then serves again", function()
    -- 300 connections that never send a byte (TLSSERVE_MAX_CONNECTIONS is
    -- 256: the rest wait in the backlog), each watched until the server
    -- closes it; prints how many it closed
    local py = ([[
import socket, time, select
socks = [socket.create_connection(("127.0.0.1", %d)) for _ in range(300)]
print("open", flush=True)
left, start = set(socks), time.time()
while left and time.time() - start < 50:
    r, _, _ = select.select(list(left), [], [], 1)
    for s in r:
        try:
            if s.recv(1) == b"":
                left.discard(s)
        except OSError:
            left.discard(s)
print("closed", 300 - len(left), "in", round(time.time() - start), flush=True)
]]):format(port)
    proc.write(dir, "idle.py", py)
    local log = dir .. "/idle.log"
    local _, stop = proc.background("python3 " .. q(dir .. "/idle.py"), log, 70)
    finally(stop)
    kube.wait_for("300 idle connections open", 20, function() return proc.read(log):find("open", 1, true) end)
    unhurt("during-idle-flood")
    local closed = kube.wait_for("the server closing them all", 60, function() return proc.read(log):match("closed (%d+)") end)
    assert.are.equal("300", closed, proc.read(log))
    local code = call("-H 'Content-Type: application/json' --data-binary @" .. q(dir .. "/review.json"))
    assert.are.equal(200, code)
    unhurt("after-idle-flood")
  end)
end)
