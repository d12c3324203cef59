-- spec/support/luaop.lua - run Lua programs with `luaop --script`.
--
-- The AddressSanitizer/UBSan build is used, so every e2e run is also a
-- memory check: a leak or an error makes the run fail.
local proc = require "support.proc"

local M = {}

M.bin = "build/asan/luaop"

-- Run `source` as a program. opts: kubeconfig (default $KUBECONFIG; false
-- for none), flags (list), args (list), env ({NAME = value|false}). Returns
-- exit code, stdout, stderr.
function M.run(source, opts)
  opts = opts or {}
  local path = os.tmpname() .. ".lua"
  local f = assert(io.open(path, "w"))
  f:write(source)
  f:close()
  local argv = { M.bin }
  if opts.kubeconfig ~= false then
    argv[#argv + 1] = "--kubeconfig"
    argv[#argv + 1] = opts.kubeconfig or assert(os.getenv("KUBECONFIG"))
  end
  argv[#argv + 1] = "--script"
  argv[#argv + 1] = path
  for _, a in ipairs(opts.flags or {}) do argv[#argv + 1] = a end
  if opts.args then
    argv[#argv + 1] = "--"
    for _, a in ipairs(opts.args) do argv[#argv + 1] = a end
  end
  local code, out, err = proc.run(argv, opts.env)
  os.remove(path)
  return code, out, err
end

-- Run a program that must succeed; returns its stdout (and stderr).
function M.ok(source, opts)
  local code, out, err = M.run(source, opts)
  assert(code == 0, ("luaop exited %s\nstdout:\n%s\nstderr:\n%s"):format(tostring(code), out, err))
  return out, err
end

return M
