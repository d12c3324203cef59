-- spec/support/manifests.lua - the repository's kustomize overlays rendered
-- as kubectl renders them, as Lua tables, and hack/certs.sh run in a
-- directory of the spec's own. Needs no cluster: kubectl kustomize runs
-- offline. The kubectl is $KUBECTL (the e2e suites set it), else the pinned
-- one hack/cluster.sh names (made by `make cluster-bin`), else one on PATH.
local core = require "luaop.core"
local proc = require "support.proc"

local M = {}

local kubectl
function M.kubectl()
  if kubectl then return kubectl end
  local k = os.getenv("KUBECTL")
  if not k or k == "" then
    local ok, out = proc.sh("hack/cluster.sh env")
    k = ok and out:match("KUBECTL=([^\n]+)")
    if not (k and proc.sh("test -x " .. k)) then
      local found, path = proc.sh("command -v kubectl")
      k = found and path:match("[^\n]+")
    end
  end
  assert(k and k ~= "", "no kubectl: set KUBECTL, or run make cluster-bin (the pinned kubectl)")
  kubectl = k
  return k
end

-- The YAML kubectl kustomize renders for `dir` (raises with its error).
function M.yaml(dir)
  local ok, out = proc.sh(M.kubectl() .. " kustomize " .. proc.quote(dir))
  assert(ok, "kubectl kustomize " .. dir .. " failed:\n" .. out)
  return out
end

-- The objects kubectl kustomize renders for `dir`, as a list.
function M.render(dir)
  local docs = assert(core.yaml.decode(M.yaml(dir)))
  local objs = {}
  for _, d in ipairs(docs) do
    if next(d) then objs[#objs + 1] = d end
  end
  return objs
end

-- The one object of `kind` named `name` among objs (raises when there is
-- not exactly one).
function M.find(objs, kind, name)
  local found
  for _, o in ipairs(objs) do
    if o.kind == kind and o.metadata.name == name then
      assert(not found, "two " .. kind .. " " .. name)
      found = o
    end
  end
  assert(found, "no " .. kind .. " " .. name)
  return found
end

-- The objects of `kind` among objs.
function M.all(objs, kind)
  local list = {}
  for _, o in ipairs(objs) do
    if o.kind == kind then list[#list + 1] = o end
  end
  return list
end

-- Run hack/certs.sh with args (a list); its exit code, stdout and stderr.
function M.certs(args)
  local argv = { "hack/certs.sh" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  return proc.run(argv)
end

-- openssl with args (a shell string); its output, raising when it fails.
function M.openssl(args)
  local ok, out = proc.sh("openssl " .. args)
  assert(ok, "openssl " .. args .. " failed:\n" .. out)
  return out
end

-- The kubectl patch lines hack/certs.sh printed, as { kind, name, patch
-- (the JSON patch's text) }.
function M.patches(out)
  local list = {}
  for kind, name, patch in out:gmatch("\n[^\n#]- patch (%S+) (%S+) %-%-type=json %-p '([^']+)'") do
    list[#list + 1] = { kind = kind, name = name, patch = patch }
  end
  return list
end

-- The kinds hack/certs.sh's patches name, as kustomize's targets need them.
local TARGETS = {
  validatingwebhookconfiguration = { group = "admissionregistration.k8s.io", kind = "ValidatingWebhookConfiguration" },
  mutatingwebhookconfiguration = { group = "admissionregistration.k8s.io", kind = "MutatingWebhookConfiguration" },
  customresourcedefinition = { group = "apiextensions.k8s.io", kind = "CustomResourceDefinition" },
}

-- A kustomization in `dir` (the spec's own) over the overlay `overlay` (a
-- path in the repository) with the patches hack/certs.sh printed applied
-- as kubectl patch would apply them, and any `extra` lines added to it;
-- returns dir, for M.render or M.yaml.
function M.patched(dir, overlay, patches, extra)
  -- (kustomize takes a relative path to a base only)
  local ok, rel = proc.sh("realpath --relative-to=" .. proc.quote(dir) .. " " .. proc.quote(overlay))
  assert(ok, rel)
  local lines = { "apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization", "resources:",
    "- " .. rel:match("[^\n]+") }
  if #patches > 0 then lines[#lines + 1] = "patches:" end
  for _, p in ipairs(patches) do
    local t = assert(TARGETS[p.kind], p.kind)
    lines[#lines + 1] = ("- target: {group: %s, kind: %s, name: %s}"):format(t.group, t.kind, p.name)
    lines[#lines + 1] = "  patch: '" .. p.patch .. "'"
  end
  for _, l in ipairs(extra or {}) do lines[#lines + 1] = l end
  proc.write(dir, "kustomization.yaml", table.concat(lines, "\n") .. "\n")
  return dir
end

return M
