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

  it("holds no compiler or headers", function()
    local ok, c = b("from --pull=never " .. image)
    assert(ok, c)
    c = c:match("(%S+)%s*$")
    finally(function() b("rm " .. c) end)
    local _, out = b("run --isolation=chroot " .. c .. " -- sh -c 'command -v cc gcc make; ls /usr/include 2>/dev/null | wc -l'")
    assert.matches("^0%s*$", out)
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

    it("has a read-only root filesystem", function()
      for _, path in ipairs { "/probe", "/tmp/probe", "/etc/luaop/operators/probe.lua" } do
        local ok, out = run.exec("touch " .. path)
        assert.is_false(ok, path .. " was writable")
        assert.matches("Read%-only file system", out)
      end
      -- and the exec itself works: a readable file is read
      local ok, out = run.exec("head -c 2 /etc/luaop/operators/at.lua")
      assert(ok, out)
      assert.are.equal("--", out)
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
end)
