-- bench/configmaps-meta.lua - bench/configmaps.lua on a metadata-only cache
-- (metadata_only: each ConfigMap's metadata alone, as PartialObjectMetadata):
-- what caching N objects costs when the reconcile reads no data
-- (bench/compare.sh; the controller-runtime peer's "configmaps-meta", with
-- builder.OnlyMetadata, is the same). One worker, as the peer's default.
local luaop = require "luaop"

return luaop.controller {
  name = "configmaps-meta",
  resource = "v1/ConfigMap",
  metadata_only = true,
  reconcile = function() end,
}
