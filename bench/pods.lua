-- bench/pods.lua - a controller on every Pod whose reconcile does nothing:
-- how cost grows with the Pods cached (bench/scale.sh; the controller-runtime
-- peer's "pods" operator is the same). One worker, as the peer's default.
local luaop = require "luaop"

return luaop.controller {
  name = "pods",
  resource = "v1/Pod",
  reconcile = function() end,
}
