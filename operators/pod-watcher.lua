-- pod-watcher.lua - the pod watcher of the TGI Kubernetes demo: once the
-- caches have synced, log every pod add, update and delete as
-- namespace/name.
--
-- A reconcile is told which pod, not what happened to it, so the watcher
-- remembers the resourceVersion it last saw of each pod: unknown means
-- added, a new version means updated, gone from the cache means deleted.
-- (Several quick updates of one pod may reach it as one: reconciles are
-- level-triggered, like controller-runtime's.)
local luaop = require "luaop"

local seen = {} -- "namespace/name" -> resourceVersion last logged

return luaop.controller {
  name = "pod-watcher",
  resource = "v1/Pod",
  concurrency = 2,

  reconcile = function(ctx, req)
    local key = req.namespace .. "/" .. req.name
    local pod = ctx:get("Pod", req)
    if not pod then
      if seen[key] then ctx.log:info("pod deleted", { pod = key }) end
      seen[key] = nil
    elseif not seen[key] then
      ctx.log:info("pod added", { pod = key })
      seen[key] = pod.metadata.resourceVersion
    elseif seen[key] ~= pod.metadata.resourceVersion then
      ctx.log:info("pod updated", { pod = key, phase = pod.status and pod.status.phase })
      seen[key] = pod.metadata.resourceVersion
    end
  end,
}
