-- spec/support/kit.lua - what specs of the test kit (luaop.testing) share:
-- a fresh directory for each test's scripts, its env stopped and the
-- directory removed after it, and a ConfigMap to create.
local proc = require "support.proc"

local M = {}

-- Called in a describe with busted's before_each and after_each (a
-- module's environment has neither): returns t, whose t.dir is a new
-- directory for each test; a test sets t.env (testing.env {...}), which is
-- stopped after it.
function M.per_test(before_each, after_each)
  local t = {}
  before_each(function() t.dir = proc.tempdir() end)
  after_each(function()
    if t.env then t.env:stop() end
    t.env = nil
    proc.sh("rm -rf " .. proc.quote(t.dir))
  end)
  return t
end

-- A ConfigMap named name in default, with data (optional).
function M.cm(name, data)
  return { apiVersion = "v1", kind = "ConfigMap", metadata = { name = name, namespace = "default" }, data = data }
end

return M
