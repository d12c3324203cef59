-- spec/support/kube.lua - drive the local control plane from specs.
--
-- Runs the pinned kubectl (KUBECTL) with the admin kubeconfig (KUBECONFIG),
-- both exported by spec/run.sh from `hack/cluster.sh env`. Waits are
-- wait-for-condition: poll a predicate until it holds or a deadline passes.
local json = require("luaop.core").json
local proc = require "support.proc"
local system = require "system"

local kube = {}

local shell_quote = proc.quote

local function env(name)
  local v = os.getenv(name)
  assert(v and v ~= "", name .. " is not set; run the e2e specs with `make test-e2e`")
  return v
end

-- Run kubectl with the given arguments, optionally feeding `stdin`.
-- Returns ok (exit status 0), and the combined stdout and stderr. Like every
-- process a spec starts, it has a deadline (proc.sh's).
function kube.kubectl(args, stdin)
  local parts = { shell_quote(env "KUBECTL"), "--kubeconfig", shell_quote(env "KUBECONFIG") }
  for _, a in ipairs(args) do parts[#parts + 1] = shell_quote(a) end
  local input
  if stdin then
    input = os.tmpname()
    local f = assert(io.open(input, "w"))
    f:write(stdin)
    f:close()
    parts[#parts + 1] = "<" .. shell_quote(input)
  end
  local called, ok, out = pcall(proc.sh, table.concat(parts, " "))
  if input then os.remove(input) end
  if not called then error(ok, 2) end
  return ok, out
end

-- kubectl that must succeed; raises with its output otherwise.
function kube.must(args, stdin)
  local ok, out = kube.kubectl(args, stdin)
  if not ok then
    error("kubectl " .. table.concat(args, " ") .. " failed:\n" .. out, 2)
  end
  return out
end

-- Apply a manifest given as YAML or JSON text.
function kube.apply(manifest)
  return kube.must({ "apply", "-f", "-" }, manifest)
end

-- Create from a manifest; returns ok and kubectl's output (for rejections).
function kube.create(manifest)
  return kube.kubectl({ "create", "-f", "-" }, manifest)
end

-- Get one object as a Lua table, or nil and kubectl's output when the API
-- server says NotFound. Any other failure (a refused connection, a timeout,
-- Forbidden, an unknown kind) raises: absence is never inferred from an error.
function kube.get(kind, name, namespace)
  local args = { "get", kind, name, "-o", "json" }
  if namespace then
    args[#args + 1] = "-n"
    args[#args + 1] = namespace
  end
  local ok, out = kube.kubectl(args)
  if not ok then
    if out:find("(NotFound)", 1, true) then return nil, out end
    error("kubectl " .. table.concat(args, " ") .. " failed:\n" .. out, 2)
  end
  return json.decode(out)
end

-- List objects of a kind; returns the items array.
function kube.list(kind, namespace, ...)
  local args = { "get", kind, "-o", "json", ... }
  if namespace then
    args[#args + 1] = "-n"
    args[#args + 1] = namespace
  else
    args[#args + 1] = "--all-namespaces"
  end
  return json.decode(kube.must(args)).items
end

-- Poll `predicate` until it returns a truthy value, which is returned.
-- Raises naming `what` when `timeout` seconds pass first.
function kube.wait_for(what, timeout, predicate)
  local deadline = system.gettime() + timeout
  local last
  repeat
    local v = predicate()
    if v then return v end
    last = v
    system.sleep(0.1)
  until system.gettime() > deadline
  error(("timed out after %gs waiting for %s (last: %s)"):format(timeout, what, tostring(last)), 2)
end

-- Start `kubectl <args> --watch` in the background, its output going to a
-- file, so that no transition is missed between polls. The returned watch
-- has :lines() (everything printed so far) and :stop().
function kube.watch(args)
  local out = os.tmpname()
  local parts = { shell_quote(env "KUBECTL"), "--kubeconfig", shell_quote(env "KUBECONFIG") }
  for _, a in ipairs(args) do parts[#parts + 1] = shell_quote(a) end
  parts[#parts + 1] = "--watch >" .. shell_quote(out) .. " 2>&1 & echo $!"
  local p = assert(io.popen(table.concat(parts, " "), "r"))
  local pid = assert(tonumber(p:read("l")), "could not start kubectl --watch")
  p:close()
  local w = {}
  function w.lines() return proc.lines(out) end
  function w.stop()
    os.execute("kill " .. pid .. " 2>/dev/null")
    os.remove(out)
  end
  return w
end

-- A namespace of its own for a spec, created now; remove it with kube.delete_namespace.
function kube.new_namespace(prefix)
  local name = ("%s-%d-%04d"):format(prefix or "e2e", os.time(), math.random(0, 9999))
  kube.must({ "create", "namespace", name })
  -- The controller manager gives each namespace its default ServiceAccount,
  -- without which the API server refuses Pods.
  kube.wait_for("ServiceAccount default in " .. name, 30, function()
    return kube.get("serviceaccount", "default", name) ~= nil
  end)
  return name
end

function kube.delete_namespace(name)
  kube.kubectl({ "delete", "namespace", name, "--wait=false" })
end

-- Namespace secretsync, the secret copier's (operators/secret-copy.lua):
-- one an earlier run is still deleting is waited out, and one this call
-- creates is handed back as the function that deletes it (hand it to
-- finally); nil when it was there already.
function kube.secretsync_namespace()
  kube.wait_for("namespace secretsync absent or active", 60, function()
    local n = kube.get("namespace", "secretsync")
    return n == nil or n.status.phase == "Active"
  end)
  if kube.get("namespace", "secretsync") then return nil end
  kube.must { "create", "namespace", "secretsync" }
  return function() kube.kubectl { "delete", "namespace", "secretsync", "--wait=false" } end
end

-- A source Secret of the secret copier (operators/secret-copy.lua), name,
-- in namespace secretsync (which must exist), with data password=one.
-- Returns the function that removes it (hand it to finally): with its
-- finalizer taken off, should the operator be gone before it could.
function kube.sync_source(name)
  kube.must { "create", "secret", "generic", name, "-n", "secretsync", "--type=k8s.ziwon.dev/secretsync",
    "--from-literal=password=one" }
  return function()
    kube.kubectl { "delete", "secret", name, "-n", "secretsync", "--ignore-not-found", "--wait=false" }
    kube.kubectl { "patch", "secret", name, "-n", "secretsync", "--type=merge", "-p", '{"metadata":{"finalizers":null}}' }
  end
end

kube.json = json

return kube
