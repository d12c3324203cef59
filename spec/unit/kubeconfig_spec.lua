-- luaop.core.kubeconfig: configuration resolved as kubectl and
-- controller-runtime resolve it, and errors that name file, line and field.
local kubeconfig = require("luaop.core").kubeconfig

local function b64(s)
  local chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  return ((s:gsub(".", function(c)
    local bits = ""
    local byte = c:byte()
    for i = 8, 1, -1 do bits = bits .. ((byte % 2 ^ i - byte % 2 ^ (i - 1) > 0) and "1" or "0") end
    return bits
  end) .. "0000"):gsub("%d%d%d?%d?%d?%d?", function(x)
    if #x < 6 then return "" end
    local c = 0
    for i = 1, 6 do c = c + (x:sub(i, i) == "1" and 2 ^ (6 - i) or 0) end
    return chars:sub(c + 1, c + 1)
  end) .. ({ "", "==", "=" })[#s % 3 + 1])
end

local dirs = {}

-- A fresh directory with the given files ({name = content}); returns its path.
local function tree(files)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  dirs[#dirs + 1] = dir
  for name, content in pairs(files or {}) do
    local sub = name:match("^(.*)/[^/]*$")
    if sub then assert(os.execute("mkdir -p '" .. dir .. "/" .. sub .. "'")) end
    local f = assert(io.open(dir .. "/" .. name, "w"))
    f:write(content)
    f:close()
  end
  return dir
end

local function load(opts)
  opts.env = opts.env or {}
  return kubeconfig.load(opts)
end

local basic = [[
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://dev.example:6443
    certificate-authority: certs/ca.crt
- name: prod-cluster
  cluster:
    server: https://prod.example:6443
    certificate-authority-data: %s
    tls-server-name: api.prod.internal
    proxy-url: http://proxy.example:3128
- name: lab
  cluster:
    server: https://lab.example
    insecure-skip-tls-verify: true
contexts:
- name: dev
  context: {cluster: dev-cluster, user: alice, namespace: team-a}
- name: prod
  context: {cluster: prod-cluster, user: bob}
- name: lab
  context: {cluster: lab, user: carol}
users:
- name: alice
  user:
    client-certificate: certs/alice.crt
    client-key: /abs/alice.key
- name: bob
  user:
    client-certificate-data: %s
    client-key-data: %s
- name: carol
  user:
    token: carol-token
    tokenFile: tokens/carol
    username: carol
    password: hunter2
]]

local function basic_config()
  return basic:format(b64("CA PEM"), b64("CERT PEM"), b64("KEY PEM"))
end

describe("luaop.core.kubeconfig", function()
  teardown(function()
    for _, d in ipairs(dirs) do os.execute("rm -rf '" .. d .. "'") end
  end)

  describe("a single file", function()
    it("resolves the current context, its cluster, user and namespace", function()
      local dir = tree { config = basic_config() }
      local c = assert(load { kubeconfig = dir .. "/config" })
      assert.are.equal("dev", c.context)
      assert.are.equal("dev-cluster", c.cluster)
      assert.are.equal("alice", c.user)
      assert.are.equal("team-a", c.namespace)
      assert.are.equal("https://dev.example:6443", c.server)
      assert.are.equal(dir .. "/config", c.source)
      assert.is_false(c.in_cluster)
      assert.is_false(c.insecure)
    end)

    it("resolves relative paths against the file's directory and keeps absolute ones", function()
      local dir = tree { ["sub/config"] = basic_config() }
      local c = assert(load { kubeconfig = dir .. "/sub/config" })
      assert.are.equal(dir .. "/sub/certs/ca.crt", c.ca_file)
      assert.are.equal(dir .. "/sub/certs/alice.crt", c.cert_file)
      assert.are.equal("/abs/alice.key", c.key_file)
    end)

    it("decodes the -data fields and reads TLS server name and proxy", function()
      local dir = tree { config = basic_config() }
      local c = assert(load { kubeconfig = dir .. "/config", context = "prod" })
      assert.are.equal("CA PEM", c.ca_data)
      assert.are.equal("CERT PEM", c.cert_data)
      assert.are.equal("KEY PEM", c.key_data)
      assert.are.equal("api.prod.internal", c.tls_server_name)
      assert.are.equal("http://proxy.example:3128", c.proxy_url)
      assert.are.equal("default", c.namespace) -- the context names none
    end)

    it("reads token, tokenFile, basic auth and insecure-skip-tls-verify", function()
      local dir = tree { config = basic_config() }
      local c = assert(load { kubeconfig = dir .. "/config", context = "lab" })
      assert.are.equal("carol-token", c.token)
      assert.are.equal(dir .. "/tokens/carol", c.token_file)
      assert.are.equal("carol", c.username)
      assert.are.equal("hunter2", c.password)
      assert.is_true(c.insecure)
    end)

    it("lets --namespace override the context's namespace", function()
      local dir = tree { config = basic_config() }
      local c = assert(load { kubeconfig = dir .. "/config", namespace = "other" })
      assert.are.equal("other", c.namespace)
    end)

    it("prefers --kubeconfig over KUBECONFIG and ~/.kube/config", function()
      local a = tree { config = basic_config() }
      local home = tree { [".kube/config"] = basic_config():gsub("current%-context: dev", "current-context: prod") }
      local c = assert(load { kubeconfig = a .. "/config", env = { KUBECONFIG = home .. "/.kube/config", HOME = home } })
      assert.are.equal("dev", c.context)
    end)
  end)

  describe("exec credential plugins", function()
    it("reads command, args, env, apiVersion and resolves a relative command path", function()
      local dir = tree { config = [[
current-context: c
clusters: [{name: k, cluster: {server: "https://k:6443"}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/get-token
      args: [--cluster, k, "--verbose=false"]
      env:
      - {name: REGION, value: eu-west-1}
      - {name: EMPTY}
      interactiveMode: Never
      provideClusterInfo: true
]] }
      local c = assert(load { kubeconfig = dir .. "/config" })
      local ex = c.exec
      assert.are.equal("client.authentication.k8s.io/v1", ex.api_version)
      assert.are.equal(dir .. "/./bin/get-token", ex.command)
      assert.are.same({ "--cluster", "k", "--verbose=false" }, ex.args)
      assert.are.same({ REGION = "eu-west-1", EMPTY = "" }, ex.env)
      assert.are.equal("Never", ex.interactive_mode)
      assert.is_true(ex.provide_cluster_info)
    end)

    it("leaves a bare command name to PATH", function()
      local dir = tree { config = [[
current-context: c
clusters: [{name: k, cluster: {server: "https://k"}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws}}}]
]] }
      local c = assert(load { kubeconfig = dir .. "/config" })
      assert.are.equal("aws", c.exec.command)
      assert.are.same({}, c.exec.args)
    end)
  end)

  describe("KUBECONFIG", function()
    it("merges files: the first to name an entry or set current-context wins", function()
      local dir = tree {
        a = [[
current-context: from-a
contexts: [{name: from-a, context: {cluster: shared, user: ua}}]
clusters: [{name: shared, cluster: {server: "https://first"}}]
users: [{name: ua, user: {token: a-token}}]
]],
        b = [[
current-context: from-b
contexts:
- {name: from-a, context: {cluster: other, user: ub}}
- {name: from-b, context: {cluster: shared, user: ub, namespace: nb}}
clusters:
- {name: shared, cluster: {server: "https://second"}}
- {name: other, cluster: {server: "https://other"}}
users: [{name: ub, user: {token: b-token}}]
]],
      }
      local env = { KUBECONFIG = dir .. "/a:" .. dir .. "/missing:" .. dir .. "/b" }
      local c = assert(load { env = env })
      assert.are.equal("from-a", c.context)
      assert.are.equal("https://first", c.server)
      assert.are.equal("a-token", c.token)
      assert.are.equal(dir .. "/a", c.source)
      -- A context only b defines, using a cluster a defines first.
      c = assert(load { env = env, context = "from-b" })
      assert.are.equal("https://first", c.server)
      assert.are.equal("b-token", c.token)
      assert.are.equal("nb", c.namespace)
      assert.are.equal(dir .. "/b", c.source)
    end)

    it("is an error when none of its files exists", function()
      local c, err = load { env = { KUBECONFIG = "/nonexistent/a:/nonexistent/b" } }
      assert.is_nil(c)
      assert.matches("KUBECONFIG=/nonexistent/a:/nonexistent/b: none of these files exists", err, 1, true)
    end)

    it("is preferred to in-cluster and ~/.kube/config", function()
      local dir = tree { k = basic_config(), ["sa/token"] = "t" }
      local c = assert(load { env = { KUBECONFIG = dir .. "/k", KUBERNETES_SERVICE_HOST = "10.0.0.1",
                                     KUBERNETES_SERVICE_PORT = "443", HOME = dir }, sa_dir = dir .. "/sa" })
      assert.is_false(c.in_cluster)
      assert.are.equal("dev", c.context)
    end)
  end)

  describe("in-cluster", function()
    it("uses the service host and port and the service account's files", function()
      local dir = tree { ["sa/token"] = "tok", ["sa/ca.crt"] = "ca", ["sa/namespace"] = "operators\n" }
      local c = assert(load { env = { KUBERNETES_SERVICE_HOST = "10.96.0.1", KUBERNETES_SERVICE_PORT = "443" },
                              sa_dir = dir .. "/sa" })
      assert.is_true(c.in_cluster)
      assert.are.equal("in-cluster", c.source)
      assert.are.equal("https://10.96.0.1:443", c.server)
      assert.are.equal(dir .. "/sa/token", c.token_file)
      assert.are.equal(dir .. "/sa/ca.crt", c.ca_file)
      assert.are.equal("operators", c.namespace)
      assert.is_nil(c.token) -- read from the file when used, since bound tokens rotate
    end)

    it("brackets an IPv6 service host", function()
      local dir = tree { ["sa/token"] = "tok" }
      local c = assert(load { env = { KUBERNETES_SERVICE_HOST = "fd00::1", KUBERNETES_SERVICE_PORT = "443" },
                              sa_dir = dir .. "/sa" })
      assert.are.equal("https://[fd00::1]:443", c.server)
      assert.are.equal("default", c.namespace)
    end)

    it("falls back to ~/.kube/config without a token file, as controller-runtime does", function()
      local home = tree { [".kube/config"] = basic_config() }
      local c = assert(load { env = { KUBERNETES_SERVICE_HOST = "10.96.0.1", KUBERNETES_SERVICE_PORT = "443",
                                      HOME = home }, sa_dir = home .. "/no-sa" })
      assert.is_false(c.in_cluster)
      assert.are.equal(home .. "/.kube/config", c.source)
    end)
  end)

  describe("errors", function()
    local function err_of(content, opts)
      local dir = tree { config = content }
      opts = opts or {}
      opts.kubeconfig = dir .. "/config"
      local c, err = load(opts)
      assert.is_nil(c)
      assert.is_string(err)
      return err, dir .. "/config"
    end

    it("names a missing file", function()
      local c, err = load { kubeconfig = "/nonexistent/kubeconfig" }
      assert.is_nil(c)
      assert.are.equal("kubeconfig /nonexistent/kubeconfig: No such file or directory", err)
    end)

    it("names file and line of a YAML syntax error", function()
      local err, path = err_of("clusters:\n- name: a\n  cluster: {server: [\n")
      assert.matches("^kubeconfig " .. path:gsub("%p", "%%%0") .. ": line %d+: ", err)
    end)

    it("names the field with the wrong type", function()
      local err = err_of([[
current-context: c
clusters: [{name: k, cluster: {server: "https://k", insecure-skip-tls-verify: "yes please"}}]
contexts: [{name: c, context: {cluster: k}}]
]])
      assert.matches("line 2: clusters%[k%]%.cluster%.insecure%-skip%-tls%-verify must be true or false", err)
      err = err_of("clusters: {a: b}\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: a}}]\n")
      assert.matches("line 1: clusters must be a list", err)
    end)

    it("names invalid base64", function()
      local err = err_of([[
current-context: c
clusters: [{name: k, cluster: {server: "https://k"}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users:
- name: u
  user:
    client-certificate-data: "!!!not base64"
    client-key-data: a2V5
]])
      assert.matches("line 7: users%[u%]%.user%.client%-certificate%-data is not valid base64", err)
    end)

    it("names a missing context, cluster, user or server", function()
      assert.matches('context "nope" not found', err_of(basic_config(), { context = "nope" }))
      assert.matches("no current%-context is set; choose one with %-%-context",
        err_of("clusters: []\n"))
      assert.matches('contexts%[c%]%.context%.cluster: cluster "gone" not found',
        err_of("current-context: c\ncontexts: [{name: c, context: {cluster: gone}}]\n"))
      assert.matches('contexts%[c%]%.context%.user: user "gone" not found', err_of(
        "current-context: c\nclusters: [{name: k, cluster: {server: 'https://k'}}]\n" ..
        "contexts: [{name: c, context: {cluster: k, user: gone}}]\n"))
      assert.matches("clusters%[k%]%.cluster%.server is missing", err_of(
        "current-context: c\nclusters: [{name: k, cluster: {certificate-authority: ca}}]\n" ..
        "contexts: [{name: c, context: {cluster: k}}]\n"))
    end)

    it("refuses a certificate without a key, an insecure cluster with a CA, and auth-provider", function()
      local head = "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
      local cluster = "clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
      assert.matches("users%[u%]%.user has a client certificate but no client key",
        err_of(head .. cluster .. "users: [{name: u, user: {client-certificate: c.crt}}]\n"))
      assert.matches("insecure%-skip%-tls%-verify cannot be combined with a certificate authority",
        err_of(head .. "clusters: [{name: k, cluster: {server: 'https://k', insecure-skip-tls-verify: true, " ..
          "certificate-authority: ca}}]\nusers: [{name: u, user: {}}]\n"))
      assert.matches("auth%-provider is not supported; use an exec credential plugin",
        err_of(head .. cluster .. "users: [{name: u, user: {auth-provider: {name: gcp}}}]\n"))
    end)

    it("refuses an unsupported exec apiVersion and a missing command", function()
      local base = "current-context: c\nclusters: [{name: k, cluster: {server: 'https://k'}}]\n" ..
                   "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
      assert.matches("exec%.apiVersion client%.authentication%.k8s%.io/v1alpha1 is not supported",
        err_of(base .. "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1alpha1, command: x}}}]\n"))
      assert.matches("users%[u%]%.user%.exec%.command is missing",
        err_of(base .. "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1}}}]\n"))
    end)

    it("never puts a credential into an error message", function()
      local err = err_of([[
current-context: c
clusters: [{name: k, cluster: {server: "ftp://k"}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {token: very-secret-token, password: very-secret-password}}]
]])
      assert.matches("must start with https:// or http://", err)
      assert.is_nil(err:find("very-secret", 1, true))
    end)

    it("reports no configuration at all clearly", function()
      local c, err = load { env = { HOME = tree() } }
      assert.is_nil(c)
      assert.matches("no Kubernetes configuration: pass %-%-kubeconfig, set KUBECONFIG", err)
    end)
  end)
end)
