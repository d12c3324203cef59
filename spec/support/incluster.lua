-- spec/support/incluster.lua - what the spec/incluster files after
-- incluster_spec.lua share before they deploy an overlay of their own.
local kube = require "support.kube"
local proc = require "support.proc"

local M = {}

-- Build luaop's image and import it into the real node's containerd (both
-- cached by the sources' hash: done once per suite), its output in
-- build/test/incluster-NAME-image.log; then wait until what an earlier
-- file's teardown deletes (luaop-system, secretsync, the CRDs) is gone.
function M.prepare(name)
  local log = "build/test/incluster-" .. name .. "-image.log"
  assert(proc.sh("hack/image.sh luaop:latest >" .. log .. " 2>&1 && hack/node.sh import luaop:latest >>" .. log
    .. " 2>&1", 1800), "the image was not built or imported:\n" .. proc.tail(proc.read(log), 40))
  for _, o in ipairs { { "namespace", "luaop-system" }, { "namespace", "secretsync" },
    { "crd", "ats.cnat.programming-kubernetes.info" }, { "crd", "machines.useless.container.training" },
    { "crd", "switches.useless.container.training" } } do
    kube.wait_for(o[1] .. " " .. o[2] .. " to finish terminating", 180, function()
      local got = kube.get(o[1], o[2])
      return not (got and got.metadata.deletionTimestamp)
    end)
  end
end

return M
