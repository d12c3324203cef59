-- spec/support/fake.lua - start spec/support/fake_apiserver.py for unit
-- specs: over plain HTTP, or over TLS with a CA of its own.
local system = require "system"
local proc = require "support.proc"

local M = {}

local python = io.open("/usr/bin/python3") and "/usr/bin/python3" or "python3"

-- Start a fake API server (over TLS when opts.tls). Returns a handle:
-- kubeconfig (a file naming it, with token good-token), log (its request
-- log: "METHOD PATH AUTH" lines), port, dir, requests() (the log's lines),
-- control(what) (the body of GET /control/<what>), stop().
function M.start(opts)
  opts = opts or {}
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. proc.quote(dir)))
  local extra, ca = "", nil
  if opts.tls then
    local ok, out = proc.sh(("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 " ..
      "-subj /CN=fake -addext subjectAltName=IP:127.0.0.1 -keyout %s/key -out %s/cert")
      :format(proc.quote(dir), proc.quote(dir)))
    assert(ok, out)
    extra, ca = (" %s/cert %s/key"):format(proc.quote(dir), proc.quote(dir)), dir .. "/cert"
  end
  local p = assert(io.popen(("%s spec/support/fake_apiserver.py %s/port %s/requests.log%s >/dev/null 2>&1 & echo $!")
    :format(python, proc.quote(dir), proc.quote(dir), extra)))
  local pid = p:read("l")
  p:close()
  local port
  local deadline = system.gettime() + 10
  repeat
    local f = io.open(dir .. "/port")
    if f then
      port = f:read("l")
      f:close()
    end
    if not port then system.sleep(0.05) end
  until port or system.gettime() > deadline
  assert(port, "the fake API server did not start")
  local h = { dir = dir, port = port, log = dir .. "/requests.log", kubeconfig = dir .. "/kubeconfig" }
  local f = assert(io.open(h.kubeconfig, "w"))
  f:write(([[
current-context: fake
clusters: [{name: fake, cluster: {server: "%s://127.0.0.1:%s"%s}}]
contexts: [{name: fake, context: {cluster: fake, user: u}}]
users: [{name: u, user: {token: good-token}}]
]]):format(opts.tls and "https" or "http", port, ca and (", certificate-authority: %q"):format(ca) or ""))
  f:close()
  function h.requests() return proc.lines(h.log) end
  -- GET /control/<what> (fake_apiserver.py's controls), its body.
  function h.control(what)
    local ok, out = proc.sh(("curl -s -m 5 %s-H 'Authorization: Bearer good-token' '%s://127.0.0.1:%s/control/%s'")
      :format(ca and "--cacert " .. proc.quote(ca) .. " " or "", opts.tls and "https" or "http", port, what))
    assert(ok, out)
    return out
  end
  function h.stop()
    os.execute("kill " .. pid .. " 2>/dev/null")
    os.execute("rm -rf " .. proc.quote(dir))
  end
  return h
end

return M
