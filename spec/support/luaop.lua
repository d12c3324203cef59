-- spec/support/luaop.lua - run Lua programs with `luaop --script`.
--
-- The AddressSanitizer/UBSan build is used, so every e2e run is also a
-- memory check: a leak or an error makes the run fail.
local proc = require "support.proc"

local M = {}

M.bin = "build/asan/luaop"

-- Write a program to a temporary file; returns its path.
local function write_script(source)
  local path = os.tmpname() .. ".lua"
  local f = assert(io.open(path, "w"))
  f:write(source)
  f:close()
  return path
end

-- Run `source` as a program (nil: only the scripts opts.flags name). opts: kubeconfig (default $KUBECONFIG; false
-- for none), flags (list), args (list), env ({NAME = value|false}). Returns
-- exit code, stdout, stderr.
function M.run(source, opts)
  opts = opts or {}
  local path = source and write_script(source)
  local argv = { M.bin }
  if opts.kubeconfig ~= false then
    argv[#argv + 1] = "--kubeconfig"
    argv[#argv + 1] = opts.kubeconfig or assert(os.getenv("KUBECONFIG"))
  end
  if path then
    argv[#argv + 1] = "--script"
    argv[#argv + 1] = path
  end
  for _, a in ipairs(opts.flags or {}) do argv[#argv + 1] = a end
  if opts.args then
    argv[#argv + 1] = "--"
    for _, a in ipairs(opts.args) do argv[#argv + 1] = a end
  end
  local code, out, err = proc.run(argv, opts.env)
  if path then os.remove(path) end
  return code, out, err
end

-- Run a program that must succeed; returns its stdout (and stderr).
function M.ok(source, opts)
  local code, out, err = M.run(source, opts)
  assert(code == 0, ("luaop exited %s\nstdout:\n%s\nstderr:\n%s"):format(tostring(code), out, err))
  return out, err
end


-- A kubeconfig for programs that never talk to an API server (its server,
-- by default one that refuses connections). Remove the file when done.
function M.offline_kubeconfig(server)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(([[
current-context: x
clusters: [{name: x, cluster: {server: %q}}]
contexts: [{name: x, context: {cluster: x}}]
]]):format(server or "http://127.0.0.1:1"))
  f:close()
  return path
end

-- Start `source` in the background (for controllers, which run until
-- stopped); source may also be a list of script paths (files or
-- directories) to pass as --script flags. Returns a handle: :stdout(),
-- :stderr() (what it printed so far), :exited(), :stop() (SIGTERM, then
-- wait for it to exit; its status).
function M.start(source, opts)
  opts = opts or {}
  local path, scripts
  if type(source) == "table" then
    scripts = {}
    for _, p in ipairs(source) do scripts[#scripts + 1] = ("--script '%s'"):format(p) end
    scripts = table.concat(scripts, " ")
  else
    path = write_script(source)
    scripts = ("--script '%s'"):format(path)
  end
  local out, err = os.tmpname(), os.tmpname()
  local status = os.tmpname()
  -- a subshell that records the exit status once luaop ends
  local cmd = ("(env -u LD_PRELOAD '%s' --kubeconfig '%s' %s %s >'%s' 2>'%s'; echo $? >'%s') & echo $!")
    :format(M.bin, opts.kubeconfig or assert(os.getenv("KUBECONFIG")), scripts, table.concat(opts.flags or {}, " "),
            out, err, status)
  os.remove(status)
  local p = assert(io.popen(cmd))
  local pid = assert(tonumber(p:read("l")))
  p:close()
  local h = {}
  local function read(file)
    local fh = io.open(file)
    if not fh then return "" end
    local s = fh:read("a")
    fh:close()
    return s
  end
  function h.stdout() return read(out) end
  function h.stderr() return read(err) end
  -- Whether luaop has exited (its status is recorded), before stop().
  function h.exited() return read(status):match("%d") ~= nil end
  -- SIGTERM to luaop (the subshell's child), wait for it to exit; its status.
  function h.stop()
    os.execute(("env -u LD_PRELOAD pkill -TERM -P %d 2>/dev/null; while kill -0 %d 2>/dev/null; do sleep 0.05; done"):format(pid, pid))
    if path then os.remove(path) end
    local code = tonumber((read(status):match("%d+")))
    os.remove(status)
    return code
  end
  function h.cleanup()
    os.remove(out)
    os.remove(err)
  end
  return h
end

return M
