-- The discovery fixture (lua/luaop/discovery.lua) and the list of kinds the
-- kit serves (docs/testing.md) match what the running local control plane
-- serves: hack/discovery.sh --check, against the cluster spec/run.sh
-- exports (KUBECTL, KUBECONFIG).
local kube = require "support.kube"
local proc = require "support.proc"

local function check(env)
  env = env or {}
  env.KUBECTL, env.KUBECONFIG = os.getenv("KUBECTL"), os.getenv("KUBECONFIG")
  return proc.run({ "hack/discovery.sh", "--check" }, env)
end

-- A copy of the file at path with `from` (plain text, once) replaced by `to`, in dir.
local function altered(dir, path, from, to)
  local text = proc.read(path)
  local i, j = text:find(from, 1, true)
  assert(i, from .. " is not in " .. path)
  return proc.write(dir, path:match("[^/]+$"), text:sub(1, i - 1) .. to .. text:sub(j + 1))
end

describe("the discovery fixture", function()
  it("matches what the local control plane serves, and so does docs/testing.md's list", function()
    local code, out, err = check()
    assert.are.equal(0, code, out .. err)
    assert.are.equal("", out)
  end)

  it("is found out by --check, with a diff, when it or the list differs", function()
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. proc.quote(dir)) end)
    local fixture = altered(dir, "lua/luaop/discovery.lua", 'short_names = { "quota" }', "short_names = {}")
    local code, out, err = check { LUAOP_DISCOVERY_FIXTURE = fixture }
    assert.are.equal(1, code)
    assert.matches('%+[^\n]*short_names = { "quota" }', out)
    assert.matches("differs from what the server serves", err)

    local docs = altered(dir, "docs/testing.md", "| v1 | LimitRange | Namespaced | limits |\n", "")
    code, out = check { LUAOP_DISCOVERY_DOCS = docs }
    assert.are.equal(1, code)
    assert.matches("%+| v1 | LimitRange | Namespaced | limits |", out)
  end)

  it("leaves out the group of a CustomResourceDefinition the cluster has", function()
    local name = "widgets.a-discovery.luaop.test"
    finally(function() kube.kubectl { "delete", "crd", name, "--ignore-not-found", "--timeout=60s" } end)
    kube.apply(kube.json.encode {
      apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition", metadata = { name = name },
      spec = { group = "a-discovery.luaop.test", scope = "Namespaced",
        names = { kind = "Widget", plural = "widgets", shortNames = { "wd" } },
        versions = { { name = "v1", served = true, storage = true,
          schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } } } },
    })
    kube.wait_for("the CRD's group in discovery", 30, function()
      local ok, out = kube.kubectl { "get", "--raw", "/apis/a-discovery.luaop.test/v1" }
      return ok and out:find('"widgets"', 1, true)
    end)
    local code, out, err = check()
    assert.are.equal(0, code, out .. err)
  end)
end)
