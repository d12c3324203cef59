-- machine-webhooks.lua - defaults for useless-machine.lua's Machine: one
-- created without spec.switches gets 1. luaop answers the API server with
-- the JSON patch from the Machine as it came to the Machine as mutate left
-- it.
local luaop = require "luaop"

return luaop.webhook.mutating {
  resource = "useless.container.training/v1alpha1/Machine",
  mutate = function(machine)
    machine.spec = machine.spec or {}
    machine.spec.switches = machine.spec.switches or 1
  end,
}
