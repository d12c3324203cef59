-- A Reloader (the specs of luaop.hash, in the kit and on the real API
-- server): each ConfigMap's data hashed into the pod template of the
-- Deployment of the same name, so that a change of the data rolls it out.
local luaop = require "luaop"

return luaop.controller {
  name = "reloader",
  resource = "v1/ConfigMap",
  watches = { { "apps/v1/Deployment", map = function(d) return { { namespace = d.metadata.namespace,
    name = d.metadata.name } } end } },
  reconcile = function(ctx, req)
    local cm, deploy = ctx:get("ConfigMap", req), ctx:get("apps/v1/Deployment", req)
    if not cm or not deploy then return end
    local meta = deploy.spec.template.metadata
    meta.annotations = meta.annotations or {}
    local hash = luaop.hash(cm.data or {})
    if meta.annotations["example.com/config-hash"] == hash then return end
    meta.annotations["example.com/config-hash"] = hash
    assert(ctx:update(deploy))
  end,
}
