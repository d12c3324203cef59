-- luaop.main - how `luaop --script` runs a script: as a program, or, when
-- it returns controller definitions, as those controllers until the process
-- ends.
local controller = require "luaop.controller"

return function(script, ...)
  local results = table.pack(script(...))
  local v = results[1]
  if controller.is_definition(v) or (type(v) == "table" and controller.is_definition(v[1])) then
    return controller.run(v)
  end
  return table.unpack(results, 1, results.n)
end
