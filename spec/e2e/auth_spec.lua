-- Authentication as the kubeconfig says: client certificates (the admin
-- kubeconfig every other spec uses), a bearer token, a token file, and exec
-- credential plugins (v1 and v1beta1), plus RBAC's Forbidden. No log line,
-- at the highest verbosity, ever holds a token.
local kube = require "support.kube"
local luaop = require "support.luaop"

local function write(path, content, mode)
  local f = assert(io.open(path, "w"))
  f:write(content)
  f:close()
  if mode then assert(os.execute(("chmod %s '%s'"):format(mode, path))) end
end

describe("authentication", function()
  local ns, dir, server, ca, reader_token, nobody_token

  local function kubeconfig(name, user_yaml)
    local path = dir .. "/" .. name
    write(path, ([[
apiVersion: v1
kind: Config
current-context: test
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority: %s
contexts:
- name: test
  context: {cluster: local, user: u, namespace: %s}
users:
- name: u
  user:
%s
]]):format(server, ca, ns, user_yaml))
    return path
  end

  -- Reads a ConfigMap through the user of `config`; prints what happened.
  local program = [[
    local luaop = require "luaop"
    local core = require "luaop.core"
    local c = luaop.client()
    for i = 1, 3 do
      local cm, err = c:get("ConfigMap", "readable")
      if not cm then
        print("error", err.reason, err.code, err.message)
        return 1
      end
    end
    print("read ok", "exec runs", core.api.exec_runs())
  ]]

  setup(function()
    ns = kube.new_namespace("e2e-auth")
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    server = kube.must { "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}" }
    ca = kube.must { "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.certificate-authority}" }
    kube.must { "create", "configmap", "readable", "-n", ns, "--from-literal=k=v" }
    kube.must { "create", "serviceaccount", "reader", "-n", ns }
    kube.must { "create", "serviceaccount", "nobody", "-n", ns }
    kube.must { "create", "rolebinding", "reader-view", "-n", ns, "--clusterrole=view",
                "--serviceaccount=" .. ns .. ":reader" }
    reader_token = kube.must({ "create", "token", "reader", "-n", ns, "--duration=1h" }):gsub("%s+$", "")
    nobody_token = kube.must({ "create", "token", "nobody", "-n", ns, "--duration=1h" }):gsub("%s+$", "")
    assert(#reader_token > 100 and #nobody_token > 100)
  end)

  teardown(function()
    if ns then kube.delete_namespace(ns) end
    if dir then os.execute("rm -rf '" .. dir .. "'") end
  end)

  -- Runs the program at the highest verbosity in both log formats; checks
  -- no token is in anything it printed.
  local function run_checked(config)
    local outs = {}
    local code
    for _, format in ipairs { "text", "json" } do
      local c, out, err = luaop.run(program, { kubeconfig = config, flags = { "-v", "10", "--log-format", format } })
      code = code or c
      assert.are.equal(code, c)
      local all = out .. err
      assert.is_nil(all:find(reader_token, 1, true), "the reader's token was logged")
      assert.is_nil(all:find(nobody_token, 1, true), "a token was logged")
      -- A JWT's signature alone is a secret too.
      assert.is_nil(all:find(reader_token:match("[^.]+$"), 1, true))
      assert.matches('"path"', all) -- the verbose logs are there
      outs[#outs + 1] = out
    end
    return code, outs[1]
  end

  it("uses a bearer token", function()
    local code, out = run_checked(kubeconfig("token", "    token: " .. reader_token))
    assert.are.equal(0, code, out)
    assert.matches("read ok\texec runs\t0", out)
  end)

  it("reads a token file, relative to the kubeconfig", function()
    write(dir .. "/reader.token", reader_token .. "\n")
    local code, out = run_checked(kubeconfig("tokenfile", "    tokenFile: reader.token"))
    assert.are.equal(0, code, out)
    assert.matches("read ok", out)
  end)

  for _, version in ipairs { "v1", "v1beta1" } do
    it("runs an exec plugin (" .. version .. ") once and reuses its credential until it expires", function()
      local plugin = dir .. "/plugin-" .. version .. ".sh"
      local count = dir .. "/runs-" .. version
      write(dir .. "/exec.token", reader_token)
      write(plugin, ([[#!/bin/sh
echo run >> "$COUNT_FILE"
# The plugin sees what kind of credential is wanted.
case "$KUBERNETES_EXEC_INFO" in *'"apiVersion":"client.authentication.k8s.io/%s"'*) ;; *) exit 3 ;; esac
printf '{"apiVersion":"client.authentication.k8s.io/%s","kind":"ExecCredential","status":{"token":"%%s","expirationTimestamp":"2999-01-01T00:00:00Z"}}' "$(cat "$TOKEN_FILE")"
]]):format(version, version), "755")
      local config = kubeconfig("exec-" .. version, ([[
    exec:
      apiVersion: client.authentication.k8s.io/%s
      command: ./plugin-%s.sh
      env:
      - {name: TOKEN_FILE, value: %s}
      - {name: COUNT_FILE, value: %s}]]):format(version, version, dir .. "/exec.token", count))
      local code, out = run_checked(config)
      assert.are.equal(0, code, out)
      assert.matches("read ok\texec runs\t1", out) -- three requests, one plugin run
      local f = assert(io.open(count))
      local runs = select(2, f:read("a"):gsub("run", ""))
      f:close()
      assert.are.equal(2, runs) -- once for each of the two runs of the program
    end)
  end

  it("exits cleanly while an exec plugin is still running", function()
    write(dir .. "/slow.sh", "#!/bin/sh\nsleep 2\necho '{}'\n", "755")
    local code, out, err = luaop.run([[
      local luaop = require "luaop"
      luaop.spawn(function() luaop.client():get("ConfigMap", "readable") end)
      print("leaving")
    ]], { kubeconfig = kubeconfig("slow", [[
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./slow.sh]]) })
    assert.are.equal(0, code, err)
    assert.matches("leaving", out)
    assert.are.equal("", err)
  end)

  it("waits on an exec plugin that does not answer for 10 s at most, saying so, and the loop goes on meanwhile", function()
    -- a child of the plugin keeps its stdout open even once it is killed
    write(dir .. "/hang.sh", "#!/bin/sh\nsleep 30 & echo $! > " .. dir .. "/hang.child\necho $$ > " .. dir ..
      "/hang.pid\nexec sleep 60\n", "755")
    finally(function()
      for _, f in ipairs { "hang.child", "hang.pid" } do
        local h = io.open(dir .. "/" .. f)
        if h then
          os.execute("kill -9 " .. h:read("l") .. " 2>/dev/null")
          h:close()
        end
      end
    end)
    local code, out, err = luaop.run([[
      local luaop = require "luaop"
      local core = require "luaop.core"
      local ticks, done = 0, false
      luaop.spawn(function() while not done do ticks = ticks + 1 luaop.sleep(0.05) end end)
      local t0 = core.task.now()
      local _, e = luaop.client():get("ConfigMap", "readable")
      done = true
      print("error", e and e.reason, e and e.message)
      print("after", ("%.0f"):format(core.task.now() - t0), ticks > 100)
    ]], { kubeconfig = kubeconfig("hang", [[
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./hang.sh]]) })
    assert.are.equal(0, code, err)
    assert.matches("error\tTransportError\texec plugin [^\n]*/%./hang%.sh did not answer within 10 s %(killed%)", out)
    assert.matches("after\t1[01]\ttrue", out) -- ten seconds, the loop running all along
    assert.matches('auth\twaiting for the exec plugin to print a credential\t{"plugin": "[^\"]*/%./hang%.sh", "seconds": 2}', err)
    assert.matches('auth\tthe exec plugin did not answer in time: killing it\t{"plugin": "[^\"]*/%./hang%.sh", "seconds": 10}', err)
    local pid = assert(io.open(dir .. "/hang.pid")):read("l")
    assert.is_not_true(os.execute("kill -0 " .. pid .. " 2>/dev/null"), "the plugin is still running")
  end)

  it("explains an exec plugin that fails", function()
    write(dir .. "/broken.sh", "#!/bin/sh\necho 'no credentials for you' >&2\nexit 7\n", "755")
    local code, out = luaop.run(program, { kubeconfig = kubeconfig("broken", [[
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./broken.sh]]) })
    assert.are.equal(1, code)
    assert.matches("error\tTransportError\t0\texec plugin .*broken%.sh exited with status 7", out)
  end)

  it("gets Forbidden for a user without RBAC", function()
    local code, out = run_checked(kubeconfig("nobody", "    token: " .. nobody_token))
    assert.are.equal(1, code)
    assert.matches("error\tForbidden\t403\t", out)
    assert.matches('cannot get resource "configmaps"', out)
  end)

  it("gets Unauthorized for a token the server does not know", function()
    local code, out = luaop.run(program, { kubeconfig = kubeconfig("bad", "    token: not-a-real-token") })
    assert.are.equal(1, code)
    assert.matches("error\tUnauthorized\t401", out)
  end)

  it("configures itself in a Pod and re-reads a rotated token after a 401", function()
    local sa = dir .. "/serviceaccount"
    assert(os.execute("mkdir -p '" .. sa .. "'"))
    write(sa .. "/token", "an-old-token\n")
    write(sa .. "/namespace", ns)
    os.execute(("cp '%s' '%s/ca.crt'"):format(ca, sa))
    write(dir .. "/new.token", reader_token)
    local host, port = server:match("^https://([^:/]+):(%d+)")
    local code, out = luaop.run(([[
      local c = require("luaop").client()
      local _, err = c:get("ConfigMap", "readable")
      print("before", err and err.reason)
      -- the kubelet rotates the token
      local src = assert(io.open(%q)):read("a")
      local f = assert(io.open(%q, "w"))
      f:write(src)
      f:close()
      local cm, err2 = c:get("ConfigMap", "readable")
      print("after", cm and cm.metadata.namespace, err2)
    ]]):format(dir .. "/new.token", sa .. "/token"), {
      kubeconfig = false,
      flags = { "-v", "10" },
      env = { KUBECONFIG = false, HOME = dir .. "/nohome", KUBERNETES_SERVICE_HOST = host,
              KUBERNETES_SERVICE_PORT = port, LUAOP_SERVICEACCOUNT_DIR = sa },
    })
    assert.are.equal(0, code, out)
    assert.matches("before\tUnauthorized", out)
    assert.matches("after\t" .. ns:gsub("%p", "%%%0") .. "\tnil", out)
  end)

  it("authenticates with client-certificate-data and client-key-data", function()
    local function b64file(path)
      local p = assert(io.popen("base64 -w0 '" .. path .. "'"))
      local out = p:read("a")
      p:close()
      return out
    end
    local cert = kube.must { "config", "view", "--minify", "-o", "jsonpath={.users[0].user.client-certificate}" }
    local key = kube.must { "config", "view", "--minify", "-o", "jsonpath={.users[0].user.client-key}" }
    local code, out = run_checked(kubeconfig("certdata", ("    client-certificate-data: %s\n    client-key-data: %s")
      :format(b64file(cert), b64file(key))))
    assert.are.equal(0, code, out)
    assert.matches("read ok", out)
  end)

  it("verifies the server's certificate for tls-server-name", function()
    local path = kubeconfig("sni", "    token: " .. reader_token)
    local f = assert(io.open(path))
    local text = f:read("a")
    f:close()
    local function with_name(name)
      write(path, (text:gsub("(certificate%-authority: [^\n]+)", "%1\n    tls-server-name: " .. name)))
      return luaop.run(program, { kubeconfig = path })
    end
    -- a name the API server's certificate has, while connecting to its address
    local code, out = with_name("kubernetes.default.svc")
    assert.are.equal(0, code, out)
    assert.matches("read ok", out)
    code, out = with_name("not-in-the-certificate.example")
    assert.are.equal(1, code)
    assert.matches("error\tTransportError\t0\t.*not%-in%-the%-certificate%.example", out)
  end)

  it("refuses a server whose certificate the CA did not sign", function()
    local other_ca = dir .. "/other-ca.crt"
    -- A CA of its own, which signed nothing the API server has.
    assert(os.execute(("openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s/other-ca.key' -out '%s' " ..
      "-subj /CN=other-ca -days 1 >/dev/null 2>&1"):format(dir, other_ca)))
    local path = kubeconfig("wrongca", "    token: " .. reader_token)
    local f = assert(io.open(path))
    local text = f:read("a"):gsub("certificate%-authority: [^\n]+", "certificate-authority: " .. other_ca)
    f:close()
    write(path, text)
    local code, out = luaop.run(program, { kubeconfig = path })
    assert.are.equal(1, code)
    assert.matches("error\tTransportError\t0\t.*[Cc]ertificate", out)
  end)
end)
