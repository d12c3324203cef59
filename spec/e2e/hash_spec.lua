-- luaop.hash on the real API server: spec/e2e/reloader.lua stamps each
-- ConfigMap's hash into its Deployment's pod template; the stamp is the
-- SHA-256 of the data's canonical JSON as another implementation writes it
-- (Python's json.dumps with sorted keys), and a change of the data rolls
-- the Deployment (a new generation, a new stamp).
local kube = require "support.kube"
local luaop = require "support.luaop"
local proc = require "support.proc"

-- sha256 of data's canonical JSON text, computed by Python
local function python_hash(json_text)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(json_text)
  f:close()
  local ok, out = proc.sh("python3 -c 'import hashlib,json,sys; v=json.load(open(sys.argv[1])); "
    .. "print(hashlib.sha256(json.dumps(v,sort_keys=True,separators=(\",\",\":\"),ensure_ascii=False)"
    .. ".encode()).hexdigest())' " .. proc.quote(path))
  os.remove(path)
  assert(ok, out)
  return out:match("^(%x+)")
end

describe("luaop.hash against the API server", function()
  it("stamps a ConfigMap's hash into its Deployment, the digest another implementation computes, " ..
    "and a change of the data rolls the Deployment", function()
    local ns = kube.new_namespace("e2e-hash")
    local source = assert(io.open("spec/e2e/reloader.lua")):read("a")
    source = source:gsub('resource = "v1/ConfigMap",', ('resource = "v1/ConfigMap", namespace = %q,'):format(ns))
      :gsub('map = function', ('namespace = %q, map = function'):format(ns))
    local run = luaop.start(source)
    finally(function()
      run.stop()
      run.cleanup()
      kube.delete_namespace(ns)
    end)
    kube.must({ "apply", "-n", ns, "-f", "-" }, [[
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web}
data: {config.yaml: "x: 1\n", motd: "<ü> & \"é\"\t"}
]])
    local function stamp()
      local d = kube.get("deployment", "web", ns)
      return d and (d.spec.template.metadata.annotations or {})["example.com/config-hash"], d
    end
    local function data_hash()
      return python_hash(kube.must { "get", "configmap", "web", "-n", ns, "-o", "jsonpath={.data}" })
    end
    local want = data_hash()
    kube.wait_for("the Deployment stamped", 30, function() return stamp() == want end)
    local _, d = stamp()
    local generation = d.metadata.generation
    kube.must { "patch", "configmap", "web", "-n", ns, "--type=merge", "-p", '{"data":{"config.yaml":"x: 2\\n"}}' }
    local changed = data_hash()
    assert.are_not.equal(want, changed)
    kube.wait_for("the new stamp", 30, function() return stamp() == changed end)
    _, d = stamp()
    assert.is_true(d.metadata.generation > generation, "the Deployment did not roll")
    assert.is_nil(run.stderr():find("Reconciler error", 1, true), run.stderr())
  end)
end)
