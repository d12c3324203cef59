-- pod-watcher.lua - the pod watcher of the TGI Kubernetes demo: once the
-- caches have synced, log every pod add, update and delete as
-- namespace/name.
--
-- Handlers instead of a reconcile: each is told what happened to which
-- pod, as client-go's AddFunc, UpdateFunc and DeleteFunc are (the pods
-- there at the start are adds). They run as events arrive and must not
-- wait: they may read the caches, log and record Events, not write.
--
-- It reads a pod's name and phase, nothing else: its cache keeps each
-- pod's metadata and status.phase alone (trim): the rest never becomes Lua.
local luaop = require "luaop"

local function key(pod) return pod.metadata.namespace .. "/" .. pod.metadata.name end

return luaop.controller {
  name = "pod-watcher",
  resource = "v1/Pod",
  trim = { keep = { "status.phase" } },

  on_add = function(ctx, pod)
    ctx.log:info("pod added", { pod = key(pod) })
  end,
  on_update = function(ctx, _, pod)
    ctx.log:info("pod updated", { pod = key(pod), phase = pod.status and pod.status.phase })
  end,
  on_delete = function(ctx, pod)
    ctx.log:info("pod deleted", { pod = key(pod) })
  end,
}
