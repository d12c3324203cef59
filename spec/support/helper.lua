-- spec/support/helper.lua - loaded by busted before any spec (.busted).
--
-- busted keeps only the last function given to finally() in a test; specs
-- here register several (a temporary file, then a process to stop, then a
-- namespace), so each test's finally() is made to stack them: all run, the
-- last registered first, and the first error among them fails the test
-- once all have run.
local busted = require "busted"

busted.subscribe({ "test", "start" }, function(element)
  local env = element.env
  local keep = env and env.finally
  if not keep then return nil, true end
  local fns = {}
  local function run_all()
    local first
    for i = #fns, 1, -1 do
      local ok, err = pcall(fns[i])
      if not ok and first == nil then first = err end
    end
    fns = {}
    if first ~= nil then error(first, 0) end
  end
  env.finally = function(fn)
    fns[#fns + 1] = fn
    keep(run_all)
  end
  return nil, true
end)
