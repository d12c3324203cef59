-- bench/configmaps.lua - a controller on every ConfigMap whose reconcile
-- does nothing: what caching N objects costs a running operator
-- (bench/compare.sh; the controller-runtime peer's "configmaps" operator is
-- the same). One worker, as the peer's default.
local luaop = require "luaop"

return luaop.controller {
  name = "configmaps",
  resource = "v1/ConfigMap",
  reconcile = function() end,
}
