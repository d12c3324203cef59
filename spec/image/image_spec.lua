-- luaop's image, built from the Dockerfile (hack/image.sh: buildah, cached by
-- a hash of its inputs) and run as a container (runc: the image's own
-- entrypoint, user and command, a read-only root, no capabilities) against
-- the local control plane, as the manifests' Deployment runs it: the four
-- operators from a mounted directory, the ServiceAccount's token, CA and
-- namespace where a Pod has them. spec/run.sh runs this after spec/e2e, on
-- the same control plane, whenever the machine can build images (root).
local kube = require "support.kube"
local container = require "support.container"
local json = require("luaop.core").json
local time = require("luaop").time

local image = os.getenv("LUAOP_IMAGE") or "luaop:spec"
local sh, must = container.sh, container.must

local function b(args) return sh(container.buildah(args)) end

local function root() return must("pwd"):gsub("%s+$", "") end

-- The API server's URL and CA, from the admin kubeconfig.
local function cluster()
  local cfg = json.decode(kube.must { "config", "view", "--raw", "--minify", "--flatten", "-o", "json" })
  local c = cfg.clusters[1].cluster
  return c.server, c["certificate-authority-data"]
end

local function decode_b64(s)
  return must("printf %s " .. s:gsub("[^%w+/=]", "") .. " | base64 -d")
end

describe("the luaop image", function()
  setup(function()
    -- built once per change of its sources; the build's output goes to a log
    local log = "build/test/image-build.log"
    local ok = sh("hack/image.sh " .. image .. " >" .. log .. " 2>&1", 1800) -- cold: debootstrap and two builds
    if not ok then
      local f = io.open(log)
      local tail = f and f:read("a"):sub(-3000) or ""
      if f then f:close() end
      error("hack/image.sh did not build " .. image .. ":\n" .. tail)
    end
  end)

  it("is built by a builder stage that installs only through hack/deps.sh", function()
    local f = assert(io.open("Dockerfile"))
    local text = f:read("a")
    f:close()
    local builder = assert(text:match("FROM[^\n]* AS build\n(.-)\nFROM "), "no builder stage named build")
    assert.is_nil(builder:find("apt%-get"), "the builder stage runs apt-get itself")
    assert.matches("\nRUN hack/deps.sh build\n", "\n" .. builder .. "\n")
  end)

  it("runs luaop --version, linked with the lean libcurl and OpenSSL", function()
    local ok, c = b("from --pull=never " .. image)
    assert(ok, c)
    c = c:match("(%S+)%s*$")
    finally(function() b("rm " .. c) end)
    local ran, out = b("run --isolation=chroot " .. c .. " -- /usr/local/bin/luaop --version")
    assert(ran, out)
    assert.matches("^luaop %S+\n  Lua 5%.4", out)
    assert.matches("libcurl %S+ %(OpenSSL", out)
  end)

  it("says: a non-root user, scripts from /etc/luaop/operators", function()
    local cfg = container.config(image)
    assert.are.equal("65532:65532", cfg.User)
    assert.are.same({ "/usr/local/bin/luaop" }, cfg.Entrypoint)
    assert.are.same({ "--script", "/etc/luaop/operators" }, cfg.Cmd)
  end)

  it("holds luaop, the C library it links, a CA bundle, its users and the example operators: no shell, at most 10 MB", function()
    local ok, c = b("from --pull=never " .. image)
    assert(ok, c)
    c = c:match("(%S+)%s*$")
    finally(function() b("umount " .. c); b("rm " .. c) end)
    local mounted, mnt = b("mount " .. c)
    assert(mounted, mnt)
    mnt = mnt:match("(%S+)%s*$")
    local files, total = {}, 0
    for line in must("cd " .. mnt .. " && find . ! -type d -printf '%s %y %p\\n'"):gmatch("[^\n]+") do
      local size, kind, path = line:match("^(%d+) (%S) %./(.+)$")
      assert(path, line)
      files[#files + 1] = path
      if kind == "f" then total = total + tonumber(size) end
    end
    table.sort(files)
    local allowed = {
      "^usr/local/bin/luaop$", "^lib/x86_64%-linux%-gnu/libc%.so%.6$", "^lib/x86_64%-linux%-gnu/libm%.so%.6$",
      "^lib64/ld%-linux%-x86%-64%.so%.2$", "^etc/ssl/certs/ca%-certificates%.crt$", "^etc/passwd$", "^etc/group$",
      "^etc/nsswitch%.conf$", "^etc/hosts$", "^usr/share/luaop/operators/[%w%-]+%.lua$",
      "^usr/share/doc/[%w%.%-]+/copyright$",
    }
    for _, path in ipairs(files) do
      local known = false
      for _, pattern in ipairs(allowed) do known = known or path:find(pattern) ~= nil end
      assert(known, "the image holds " .. path .. " (all: " .. table.concat(files, " ") .. ")")
    end
    for _, path in ipairs { "usr/local/bin/luaop", "lib/x86_64-linux-gnu/libc.so.6", "etc/ssl/certs/ca-certificates.crt",
      "usr/share/luaop/operators/at.lua" } do
      assert.is_true(sh("test -s " .. mnt .. "/" .. path), path .. " is missing")
    end
    assert.matches("\nnonroot:x:65532:65532:", "\n" .. container.read(mnt .. "/etc/passwd"))
    -- the files, and the image as stored (its one layer's tar, uncompressed)
    assert.is_true(total <= 10 * 1000 * 1000, ("the image's files take %d bytes"):format(total))
    local size = 0
    local info = json.decode(must(container.buildah("inspect --type image " .. image)))
    local manifest = json.decode(info.Manifest)
    for _, layer in ipairs(manifest.layers) do size = size + layer.size end
    assert.is_true(size > 0 and size <= 10 * 1000 * 1000, ("the image is %d bytes"):format(size))
  end)

  describe("run as a container with the four operators, as the manifests' ServiceAccount,", function()
    local ns, run, dir

    setup(function()
      kube.must { "apply", "-k", "manifests/crds" }
      kube.must { "apply", "-k", "manifests/rbac" }
      kube.must { "wait", "--for", "condition=Established", "crd", "--all", "--timeout=30s" }
      ns = kube.new_namespace("image")
      local server, ca = cluster()
      local host, port = server:match("^https://([^:/]+):(%d+)")
      assert(host, "unexpected server " .. server)
      -- what the kubelet puts in a Pod: the token, the cluster's CA, the namespace
      local put
      dir, put = container.scratch()
      put("token", kube.must { "create", "token", "luaop", "-n", "luaop-system", "--duration=1h" }:gsub("%s+$", ""))
      put("ca.crt", decode_b64(ca))
      put("namespace", "luaop-system")
      run = container.start(image, {
        name = "luaop-image-spec",
        env = { "KUBERNETES_SERVICE_HOST=" .. host, "KUBERNETES_SERVICE_PORT=" .. port },
        mounts = {
          { source = root() .. "/operators", destination = "/etc/luaop/operators" },
          { source = dir, destination = "/var/run/secrets/kubernetes.io/serviceaccount" },
        },
      })
      kube.wait_for("caches synced", 30, function()
        assert(run.exited() == nil, "the container exited:\n" .. run.stderr())
        return run.stderr():find("caches synced", 1, true)
      end)
    end)

    teardown(function()
      if ns then kube.delete_namespace(ns) end
      if run then run.cleanup() end
      if dir then sh("rm -rf '" .. dir .. "'") end
    end)

    it("runs the image's entrypoint as user 65532, with no capabilities and no new privileges", function()
      local pid = assert(run.pid(), "no running container")
      local f = assert(io.open("/proc/" .. pid .. "/status"))
      local status = f:read("a")
      f:close()
      assert.matches("\nUid:%s+65532%s+65532%s+65532%s+65532\n", status)
      assert.matches("\nGid:%s+65532%s", status)
      assert.matches("\nCapEff:%s+0+\n", status)
      assert.matches("\nNoNewPrivs:%s+1\n", status)
      f = assert(io.open("/proc/" .. pid .. "/cmdline"))
      assert.are.equal("/usr/local/bin/luaop\0--script\0/etc/luaop/operators\0", f:read("a"))
      f:close()
    end)

    it("has a read-only root filesystem, and its operators mounted read-only", function()
      local pid = assert(run.pid(), "no running container")
      -- the image has no shell to try a write with: the mounts, as the process sees them
      local mounts = {}
      for line in container.read("/proc/" .. pid .. "/mountinfo"):gmatch("[^\n]+") do
        local point, options = line:match("^%S+ %S+ %S+ %S+ (%S+) (%S+)")
        mounts[point] = options
      end
      assert.matches("^ro[,$]", (mounts["/"] or "?") .. ",")
      assert.matches("^ro[,$]", (mounts["/etc/luaop/operators"] or "?") .. ",")
    end)

    it("runs an At to DONE", function()
      kube.must({ "apply", "-n", ns, "-f", "-" }, ([[
apiVersion: cnat.programming-kubernetes.info/v1alpha1
kind: At
metadata: {name: now}
spec: {schedule: "%s", command: "echo hello"}
]]):format(time.format(os.time() - 5)))
      kube.wait_for("At DONE", 60, function()
        local at = kube.get("at", "now", ns)
        return at and at.status and at.status.phase == "DONE"
      end)
      local pod = assert(kube.get("pod", "now-pod", ns), "the At's Pod")
      assert.are.equal("Succeeded", pod.status.phase)
    end)

    it("converges a Machine to ddd", function()
      kube.must({ "apply", "-n", ns, "-f", "-" }, [[
apiVersion: useless.container.training/v1alpha1
kind: Machine
metadata: {name: m}
spec: {switches: 3}
]])
      kube.wait_for("positions ddd", 60, function()
        local m = kube.get("machine", "m", ns)
        return m and m.status and m.status.positions == "ddd"
      end)
      assert.are.equal(3, #kube.list("switches", ns, "-l", "machine=m"))
    end)

    it("stops on SIGTERM with status 0, having been refused nothing", function()
      local code = run.stop()
      local err = run.stderr()
      assert.are.equal(0, code, err:sub(-2000))
      assert.is_nil(err:find("Forbidden", 1, true), err:match("[^\n]*Forbidden[^\n]*"))
    end)
  end)

  it("refuses an API server whose certificate the kubeconfig's CA did not sign", function()
    local server = cluster()
    local dir, put = container.scratch()
    finally(function() sh("rm -rf '" .. dir .. "'") end)
    -- a CA of its own, which never signed the API server's certificate
    must(("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=not-the-cluster-ca "
      .. "-keyout %s/ca.key -out %s/ca.crt"):format(dir, dir))
    must(("chmod 644 %s/ca.crt"):format(dir))
    put("kubeconfig", ([[
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "%s", certificate-authority: /etc/luaop/cfg/ca.crt}}]
users: [{name: u, user: {token: not-a-token}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
]]):format(server))
    local c = container.start(image, {
      name = "luaop-image-spec-ca",
      env = { "KUBECONFIG=/etc/luaop/cfg/kubeconfig" },
      mounts = {
        { source = root() .. "/operators", destination = "/etc/luaop/operators" },
        { source = dir, destination = "/etc/luaop/cfg" },
      },
    })
    finally(c.cleanup)
    local line = kube.wait_for("a TLS verification error", 30, function()
      assert(c.exited() == nil, "the container exited:\n" .. c.stderr())
      return c.stderr():match("[^\n]*SSL certificate problem[^\n]*")
    end)
    assert.matches("unable to get local issuer certificate", line)
    assert.is_nil(c.stderr():find("caches synced", 1, true), "it synced caches through an unverified server")
    -- nothing synced, so nothing to drain: SIGTERM ends it at once
    assert.are.equal(128 + 15, c.stop())
  end)
  -- A Pod's /etc/hosts and /etc/resolv.conf are mounted by the kubelet; an
  -- API server named by host name is found through either, and its
  -- certificate still verified against the kubeconfig's CA.
  describe("finds an API server named in its kubeconfig, and verifies it,", function()
    local dir, put, port

    setup(function()
      local server = cluster()
      port = assert(server:match("^https://[^/]+:(%d+)"), server)
      dir, put = container.scratch()
      put("kubeconfig", kube.must { "config", "view", "--raw", "--minify", "--flatten" })
    end)
    teardown(function() if dir then sh("rm -rf '" .. dir .. "'") end end)

    -- luaop --program in the image, with this kubeconfig's server renamed
    -- to HOST, and these /etc/hosts and /etc/resolv.conf: what it printed
    local function get_version(host, hosts, resolv)
      local cfg = container.read(dir .. "/kubeconfig"):gsub("server: https://[^/\n]+:%d+",
        "server: https://" .. host .. ":" .. port)
      put("kubeconfig-" .. host, cfg)
      put("hosts-" .. host, hosts)
      put("resolv-" .. host, resolv)
      put("version.lua", [[
local core = require "luaop.core"
local status, body = core.api.request { path = "/version" }
if status ~= 200 then error(tostring(body), 0) end
print(status, core.json.decode(body).gitVersion)
]])
      local c = container.start(image, {
        name = "luaop-image-spec-dns",
        env = { "KUBECONFIG=/etc/luaop/cfg/kubeconfig-" .. host },
        args = { "/usr/local/bin/luaop", "--program", "/etc/luaop/cfg/version.lua" },
        mounts = {
          { source = dir, destination = "/etc/luaop/cfg" },
          { source = dir .. "/hosts-" .. host, destination = "/etc/hosts" },
          { source = dir .. "/resolv-" .. host, destination = "/etc/resolv.conf" },
        },
      })
      finally(c.cleanup)
      kube.wait_for("luaop --program to end", 30, function() return c.exited() ~= nil end)
      return c.exited(), c.stdout(), c.stderr()
    end

    it("through /etc/hosts", function()
      local code, out, err = get_version("kubernetes", "127.0.0.1\tlocalhost\n127.0.0.1\tkubernetes\n",
        "nameserver 192.0.2.53\n") -- a server that is not there: /etc/hosts must answer
      assert.are.equal(0, code, err)
      assert.matches("^200\tv%d+%.%d+", out)
      -- a name the API server's certificate does not carry: refused
      local _
      code, _, err = get_version("luaop-api", "127.0.0.1\tlocalhost\n127.0.0.1\tluaop-api\n", "nameserver 192.0.2.53\n")
      assert.are_not.equal(0, code)
      assert.matches("no alternative certificate subject name matches target host name 'luaop%-api'", err)
    end)

    it("through the DNS server of /etc/resolv.conf", function()
      -- dnsmasq on a loopback address of its own, answering for one name only
      local pidfile = dir .. "/dnsmasq.pid"
      must(("dnsmasq --no-resolv --no-hosts --bind-interfaces --listen-address=127.0.0.153 --port=53 "
        .. "--address=/kubernetes.default.svc.cluster.local/127.0.0.1 --pid-file=%s"):format(pidfile))
      finally(function() sh("kill $(cat " .. pidfile .. ")") end)
      local code, out, err = get_version("kubernetes.default.svc.cluster.local", "127.0.0.1\tlocalhost\n",
        "nameserver 127.0.0.153\n")
      assert.are.equal(0, code, err)
      assert.matches("^200\tv%d+%.%d+", out)
      -- a name the server does not know: resolution fails, named as such
      local _
      code, _, err = get_version("kubernetes.default.svc", "127.0.0.1\tlocalhost\n", "nameserver 127.0.0.153\n")
      assert.are_not.equal(0, code)
      assert.matches("resolve host", err)
    end)
  end)
end)
