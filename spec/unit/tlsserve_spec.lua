-- The webhooks' HTTPS server (src/tlsserve.c) through core.webhook
-- (src/lbind_webhook.c): a luaop program serves with a certificate made by
-- the openssl CLI, and curl, openssl s_client and Python's ssl module talk
-- to it.
local luaop = require "support.luaop"
local kube = require "support.kube"
local proc = require "support.proc"
local system = require "system"

local q = proc.quote

-- A CA, and serving certificates it signs for 127.0.0.1 and localhost,
-- in dir: ca.crt, then NAME.crt and NAME.key for each name.
local function certs(dir, ...)
  local script = { ("cd %s"):format(q(dir)),
    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt"
      .. " -subj /CN=luaop-test-ca -days 1",
    "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' >ext" }
  for _, name in ipairs { ... } do
    script[#script + 1] = ("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout %s.key"
      .. " -out %s.csr -subj /CN=localhost"):format(name, name)
    script[#script + 1] = ("openssl x509 -req -in %s.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out %s.crt"
      .. " -days 1 -extfile ext"):format(name, name)
  end
  local ok, out = proc.sh(table.concat(script, " && ") .. " 2>&1")
  assert(ok, out)
end

-- A certificate file's serial number, lowercase hex as server:serial() says it.
local function serial_of(file)
  local ok, out = proc.sh(("openssl x509 -in %s -noout -serial"):format(q(file)))
  assert(ok, out)
  return (out:match("serial=(%x+)")):lower()
end

-- The program: serves from dir's tls.crt and tls.key on a port it writes to
-- dir/port; /hold answers once dir/go exists, /drop is collected with no
-- answer, /close closes the server; anything else is echoed as JSON.
local program = [[
local core = require "luaop.core"
local luaop = require "luaop"
io.stdout:setvbuf("line")
local dir = arg[1]
local s, err = core.webhook.start { address = "127.0.0.1:0", cert = dir .. "/tls.crt", key = dir .. "/tls.key",
  max_body = tonumber(arg[2]), timeout = tonumber(arg[3]), deadline = tonumber(arg[4]) }
assert(s, err)
local f = assert(io.open(dir .. "/port.tmp", "w"))
f:write(s:port())
f:close()
assert(os.rename(dir .. "/port.tmp", dir .. "/port"))
local function exists(p)
  local h = io.open(p)
  if h then h:close() end
  return h ~= nil
end
while true do
  local req = s:take()
  if not req then print("take nil") break end
  if req.path == "/hold" then
    print("holding")
    luaop.spawn(function()
      while not exists(dir .. "/go") do luaop.sleep(0.02) end
      print("reply", req:reply(200, "text/plain", "late\n"))
    end)
  elseif req.path == "/drop" then
    req = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
  elseif req.path == "/close" then
    print("reply", req:reply(200, "text/plain", "closing\n"))
    s:close()
    print("after close", req:reply(200, "text/plain", "again\n"))
  else
    assert(req:reply(200, "application/json", core.json.encode {
      method = req.method, path = req.path, query = req.query, content_type = req.content_type,
      authorization = req.authorization, remote = req.remote, body = req.body, serial = s:serial() }))
  end
end
print("take again", s:take())
return 0
]]

describe("the webhook server", function()
  -- Start the program on dir (which has tls.crt and tls.key); its port.
  local function serve(dir, opts)
    opts = opts or {}
    -- (a program waiting in take() ends at SIGTERM with 143, as any program does)
    local run = luaop.start(program, { offline = true, exit = 143,
      flags = { "--", dir, tostring(opts.max_body or ""), tostring(opts.timeout or ""), tostring(opts.deadline or "") } })
    finally(run.cleanup)
    local port = kube.wait_for("the server's port", 20, function()
      assert(not run.exited(), "luaop exited: " .. run.stderr())
      return tonumber(proc.read(dir .. "/port"))
    end)
    return run, port
  end

  local function tempdir(...)
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. q(dir)) end)
    certs(dir, ...)
    return dir
  end

  -- curl with the test CA: its status code, body and exit code
  local function curl(dir, port, path, args)
    local out, err = os.tmpname(), os.tmpname()
    local ok, what = proc.sh(("curl -sS --cacert %s -o %s -w '%%{http_code} %%{http_version}' %s https://127.0.0.1:%d%s 2>%s")
      :format(q(dir .. "/ca.crt"), q(out), args or "", port, path, q(err)))
    local body, stderr = proc.read(out), proc.read(err)
    os.remove(out)
    os.remove(err)
    return tonumber(what:match("^(%d+)")), body, ok, what .. "\n" .. stderr
  end

  local function install(dir, name)
    assert(proc.sh(("cd %s && cp %s.crt tls.crt && cp %s.key tls.key"):format(q(dir), name, name)))
  end

  it("hands a request to take() with its method, path, query, headers, peer and body, and its reply to the client", function()
    local dir = tempdir("a")
    install(dir, "a")
    local run, port = serve(dir)
    local code, body, _, what = curl(dir, port, "/validate-v1-pod?dryRun=true",
      [[-H 'Content-Type: application/json' -H 'Authorization: Bearer t0k3n' --data-binary '{"x":1}']])
    assert.are.equal(200, code, what)
    local got = require("luaop.core").json.decode(body)
    assert.are.same({ method = "POST", path = "/validate-v1-pod", query = "dryRun=true",
      content_type = "application/json", authorization = "Bearer t0k3n", body = '{"x":1}',
      serial = serial_of(dir .. "/a.crt") }, { method = got.method, path = got.path, query = got.query,
      content_type = got.content_type, authorization = got.authorization, body = got.body, serial = got.serial })
    assert.matches("^127%.0%.0%.1:%d+$", got.remote)
    -- no query, no headers
    code, body = curl(dir, port, "/")
    assert.are.equal(200, code)
    got = require("luaop.core").json.decode(body)
    assert.are.same({ "GET", "/" }, { got.method, got.path })
    assert.is_nil(rawget(got, "query"))
    assert.is_nil(rawget(got, "authorization"))
    assert.is_truthy(run.stdout() == "")
  end)

  it("answers request after request on a kept-alive connection without Nagle's wait for the client's delayed ACK",
    function()
    -- a reply leaves in two TLS records; with Nagle on (no TCP_NODELAY)
    -- the second waits for the client's delayed ACK: about 40 ms a request,
    -- 0.8 s for these 20, against a few ms each without
    local dir = tempdir("a")
    install(dir, "a")
    local _, port = serve(dir)
    local urls = {}
    for i = 1, 20 do urls[i] = ("https://127.0.0.1:%d/n%d"):format(port, i) end
    local ok, out = proc.sh(("curl -sS --cacert %s -H 'Content-Type: application/json' --data-binary '{\"x\":1}' "
      .. "-o /dev/null -w '%%{http_code} %%{num_connects} %%{time_total}\\n' %s"):format(q(dir .. "/ca.crt"),
      table.concat(urls, " ")))
    assert(ok, out)
    local n, connects, after_first = 0, 0, 0
    for code, c, t in out:gmatch("(%d+) (%d+) ([%d.]+)") do
      n = n + 1
      assert.are.equal("200", code)
      connects = connects + tonumber(c)
      if n > 1 then after_first = after_first + tonumber(t) end
    end
    assert.are.equal(20, n, out)
    assert.are.equal(1, connects, "the connection was not kept alive:\n" .. out)
    assert.is_true(after_first < 0.4, ("19 requests on a kept-alive connection took %.3f s:\n%s"):format(after_first, out))
  end)

  it("serves TLS 1.2 and 1.3 over HTTP/1.1 only, and refuses TLS 1.1 with a protocol version alert", function()
    local dir = tempdir("a")
    install(dir, "a")
    local _, port = serve(dir)
    for _, v in ipairs { { "--tlsv1.2 --tls-max 1.2", "TLSv1.2" }, { "--tlsv1.3", "TLSv1.3" } } do
      local code, _, _, what = curl(dir, port, "/", v[1] .. " -v")
      assert.are.equal(200, code, what)
      assert.matches("SSL connection using " .. v[2]:gsub("%.", "%%."), what)
    end
    -- a client asking for HTTP/2 gets HTTP/1.1 (ALPN never picks h2)
    local code, _, _, what = curl(dir, port, "/", "--http2")
    assert.are.equal(200, code, what)
    assert.matches("^200 1%.1", what)
    -- a client that would speak TLS 1.1 (and its old ciphers) is refused by the server
    local _, out = proc.sh(("openssl s_client -connect 127.0.0.1:%d -tls1_1 -cipher DEFAULT@SECLEVEL=0 </dev/null 2>&1")
      :format(port))
    assert.matches("alert protocol version", out)
  end)

  it("serves the new certificate once its files are replaced, with no request failing meanwhile", function()
    local dir = tempdir("a", "b")
    install(dir, "a")
    local _, port = serve(dir)
    local old, new = serial_of(dir .. "/a.crt"), serial_of(dir .. "/b.crt")
    assert.are_not.equal(old, new)
    -- requests flow, each on a connection of its own, while the files are replaced
    local log = os.tmpname()
    finally(function() os.remove(log) end)
    local pid, stop = proc.background(("sh -c 'for i in $(seq 400); do curl -sS --cacert %s -o /dev/null"
      .. " -w \"%%{http_code}\\n\" https://127.0.0.1:%d/ || echo failed; [ -e %s ] && break; done'")
      :format(q(dir .. "/ca.crt"), port, q(dir .. "/stop")), log, 120)
    finally(stop)
    kube.wait_for("requests flowing", 20, function() return select(2, proc.read(log):gsub("200", "")) >= 5 end)
    -- as a Secret volume is updated: each file replaced whole (a rename), the certificate first
    assert(proc.sh(("cd %s && cp b.crt new.crt && mv new.crt tls.crt && cp b.key new.key && mv new.key tls.key")
      :format(q(dir))))
    kube.wait_for("the new serial served", 20, function()
      local code, body = curl(dir, port, "/")
      return code == 200 and body:find('"serial":"' .. new .. '"', 1, true)
    end)
    local _, shown = proc.sh(("openssl s_client -connect 127.0.0.1:%d -servername localhost </dev/null 2>/dev/null"
      .. " | openssl x509 -noout -serial"):format(port))
    assert.are.equal(new, shown:match("serial=(%x+)"):lower())
    local before = select(2, proc.read(log):gsub("200", ""))
    kube.wait_for("requests after the change", 20, function() return select(2, proc.read(log):gsub("200", "")) >= before + 5 end)
    assert(proc.sh("touch " .. q(dir .. "/stop")))
    -- (the loop ends after the request in flight: killed mid-request, its
    -- client would be gone before the reply, which the program asserts on)
    kube.wait_for("the request loop to end", 30, function() return not proc.sh("kill -0 " .. pid .. " 2>/dev/null") end)
    stop()
    local lines = proc.read(log)
    assert.is_nil(lines:find("failed", 1, true), lines)
    for line in lines:gmatch("[^\n]+") do assert.are.equal("200", line) end
    assert.is_number(pid)
  end)

  it("keeps serving the old pair when the new files do not load, and says why in its log", function()
    local dir = tempdir("a", "b")
    install(dir, "a")
    local run, port = serve(dir)
    local old = serial_of(dir .. "/a.crt")
    -- a key that is not the certificate's
    assert(proc.sh(("cd %s && cp b.key new.key && mv new.key tls.key"):format(q(dir))))
    kube.wait_for("the log line", 20, function()
      return run.stderr():find("do not load: serving the old pair", 1, true)
    end)
    assert.matches("is not the certificate", run.stderr())
    local code, body = curl(dir, port, "/")
    assert.are.equal(200, code)
    assert.is_truthy(body:find('"serial":"' .. old .. '"', 1, true))
    -- then garbage for a certificate
    assert(proc.sh(("cd %s && echo garbage >new.crt && mv new.crt tls.crt"):format(q(dir))))
    kube.wait_for("the second log line", 20, function()
      return select(2, run.stderr():gsub("do not load", "")) >= 2
    end)
    code, body = curl(dir, port, "/")
    assert.are.equal(200, code)
    assert.is_truthy(body:find('"serial":"' .. old .. '"', 1, true))
  end)

  it("answers a body over max_body with 413, before reading it all into memory, and serves one at the limit", function()
    local dir = tempdir("a")
    install(dir, "a")
    local _, port = serve(dir, { max_body = 1024 })
    local ok = proc.sh(("head -c 1024 /dev/zero >%s/small && head -c 1025 /dev/zero >%s/big && head -c 9000000 /dev/zero >%s/huge")
      :format(q(dir), q(dir), q(dir)))
    assert(ok)
    assert.are.equal(200, (curl(dir, port, "/", "--data-binary @" .. q(dir .. "/small"))))
    assert.are.equal(413, (curl(dir, port, "/", "--data-binary @" .. q(dir .. "/big"))))
    assert.are.equal(413, (curl(dir, port, "/", "--data-binary @" .. q(dir .. "/huge"))))
    assert.are.equal(200, (curl(dir, port, "/")))
  end)

  it("answers plain HTTP on its port with Go's 400, at once", function()
    local dir = tempdir("a")
    install(dir, "a")
    local _, port = serve(dir)
    for _, method in ipairs { "GET", "POST", "HEAD" } do
      local t0 = system.gettime()
      local _, out = proc.sh(("curl -sS -i -X %s --max-time 5 http://127.0.0.1:%d/validate 2>&1"):format(method, port))
      assert.matches("^HTTP/1%.0 400 Bad Request\r\n", out)
      if method ~= "HEAD" then assert.matches("Client sent an HTTP request to an HTTPS server%.", out) end
      assert.is_true(system.gettime() - t0 < 3)
    end
    assert.are.equal(200, (curl(dir, port, "/")))
  end)

  it("returns false from reply() when the client has gone before it, and serves on", function()
    local dir = tempdir("a")
    install(dir, "a")
    local run, port = serve(dir)
    local code, _, ok = curl(dir, port, "/hold", "--max-time 1")
    assert.are.equal(0, code) -- no answer: curl gave up
    assert.is_false(ok)
    kube.wait_for("the request held", 10, function() return run.stdout():find("holding", 1, true) end)
    assert(proc.sh("touch " .. q(dir .. "/go")))
    kube.wait_for("the reply", 10, function() return run.stdout():find("reply", 1, true) end)
    assert.matches("reply\tfalse", run.stdout())
    assert.are.equal(200, (curl(dir, port, "/")))
  end)

  it("answers a request collected without a reply with 500", function()
    local dir = tempdir("a")
    install(dir, "a")
    local _, port = serve(dir)
    local code, body = curl(dir, port, "/drop", "--max-time 10")
    assert.are.equal(500, code)
    assert.matches("dropped without a reply", body)
  end)

  it("cuts a client that stalls at the timeout, and one that trickles its request at the deadline", function()
    local dir = tempdir("a")
    install(dir, "a")
    local _, port = serve(dir, { timeout = 1, deadline = 3 })
    -- seconds from connecting to the server's close: silent (no handshake),
    -- handshaken then silent, and a header sent a byte every 0.4 s
    local ok, out = proc.sh(([[python3 - <<'EOF'
import socket, ssl, time
ctx = ssl.create_default_context(cafile=%q)
def closed_after(sock, trickle):
    t0 = time.monotonic()
    sock.settimeout(0.4)
    line = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    i = 0
    while time.monotonic() - t0 < 20:
        try:
            if trickle:
                sock.send(line[i:i + 1]); i += 1
            if sock.recv(1) == b"":
                break
        except socket.timeout:
            pass
        except (ConnectionError, ssl.SSLError, OSError):
            break
    return time.monotonic() - t0
raw = socket.create_connection(("127.0.0.1", %d))
print("silent %%.2f" %% closed_after(raw, False))
tls = ctx.wrap_socket(socket.create_connection(("127.0.0.1", %d)), server_hostname="localhost")
print("idle %%.2f" %% closed_after(tls, False))
tls = ctx.wrap_socket(socket.create_connection(("127.0.0.1", %d)), server_hostname="localhost")
print("trickle %%.2f" %% closed_after(tls, True))
EOF]]):format(dir .. "/ca.crt", port, port, port))
    assert(ok, out)
    local silent, idle, trickle = tonumber(out:match("silent ([%d.]+)")), tonumber(out:match("idle ([%d.]+)")),
      tonumber(out:match("trickle ([%d.]+)"))
    assert.is_true(silent >= 0.8 and silent < 3, out)
    assert.is_true(idle >= 0.8 and idle < 3, out)
    assert.is_true(trickle >= 2.8 and trickle < 6, out)
    assert.are.equal(200, (curl(dir, port, "/")))
  end)

  it("ends take() with nil once closed, refuses replies after, and frees what it held", function()
    local dir = tempdir("a")
    install(dir, "a")
    local run, port = serve(dir)
    local code, body = curl(dir, port, "/close")
    assert.are.equal(200, code)
    assert.are.equal("closing\n", body)
    kube.wait_for("the program's end", 20, function() return run.exited() end)
    assert.are.equal("reply\ttrue\nafter close\tfalse\ntake nil\ntake again\tnil\n", run.stdout())
    assert.are.equal(0, run.stop())
  end)
end)
