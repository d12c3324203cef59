-- spec/support/luaop.lua - run Lua programs with `luaop --script`.
--
-- The binary is the one that ships, build/luaop, unless LUAOP_BIN names
-- another: spec/run.sh runs the unit specs and a subset of the e2e specs
-- again with the AddressSanitizer/UBSan build, where a leak or a memory
-- error reported on stderr fails the spec that caused it (proc.lua).
-- Every process has a deadline.
local proc = require "support.proc"
local system = require "system"

local M = {}

M.bin = os.getenv("LUAOP_BIN") or "build/luaop"

-- Write a program to a temporary file; returns its path.
local function write_script(source)
  local base = os.tmpname() -- (made, empty: the program's name is base.lua)
  os.remove(base)
  local path = base .. ".lua"
  local f = assert(io.open(path, "w"))
  f:write(source)
  f:close()
  return path
end

-- The kubeconfig of opts.offline: for programs that never talk to an API
-- server (its server refuses connections). One file under build/, made on
-- first use and shared by every spec.
local offline_path = "build/spec/offline.kubeconfig"
function M.offline()
  local f = io.open(offline_path)
  if f then f:close() return offline_path end
  assert(os.execute("mkdir -p build/spec"))
  local tmp = offline_path .. "." .. tostring(system.gettime()) -- then renamed: never seen half-written
  assert(os.rename(M.offline_kubeconfig(nil, tmp), offline_path))
  return offline_path
end

-- The kubeconfig a run uses: opts.kubeconfig, the offline one, or $KUBECONFIG.
local function kubeconfig_of(opts)
  if opts.offline then return M.offline() end
  return opts.kubeconfig or assert(os.getenv("KUBECONFIG"), "no KUBECONFIG: pass opts.kubeconfig or opts.offline")
end

-- Run `source` as a trusted program (--program; with opts.script, as a
-- sandboxed --script instead; nil: only what opts.flags name). opts:
-- kubeconfig (default $KUBECONFIG; false for none), offline (true: no API
-- server, M.offline()), flags (list), args
-- (list), env ({NAME = value|false}), deadline (seconds; see proc.run).
-- Returns exit code, stdout, stderr.
function M.run(source, opts)
  opts = opts or {}
  local path = source and write_script(source)
  local argv = { opts.bin or M.bin }
  if opts.kubeconfig ~= false then
    argv[#argv + 1] = "--kubeconfig"
    argv[#argv + 1] = kubeconfig_of(opts)
  end
  if path then
    argv[#argv + 1] = opts.script and "--script" or "--program"
    argv[#argv + 1] = path
  end
  for _, a in ipairs(opts.flags or {}) do argv[#argv + 1] = a end
  if opts.args then
    argv[#argv + 1] = "--"
    for _, a in ipairs(opts.args) do argv[#argv + 1] = a end
  end
  local ok, code, out, err = pcall(proc.run, argv, opts.env, { deadline = opts.deadline })
  if path then os.remove(path) end
  if not ok then error(code, 2) end
  return code, out, err
end

-- Run a program that must succeed; returns its stdout (and stderr).
function M.ok(source, opts)
  local code, out, err = M.run(source, opts)
  assert(code == 0, ("luaop exited %s\nstdout:\n%s\nstderr:\n%s"):format(tostring(code), out, err))
  return out, err
end


-- A kubeconfig file of its own (its server, by default one that refuses
-- connections), at path or a temporary file. Remove the file when done.
function M.offline_kubeconfig(server, path)
  path = path or os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(([[
current-context: x
clusters: [{name: x, cluster: {server: %q}}]
contexts: [{name: x, context: {cluster: x}}]
]]):format(server or "http://127.0.0.1:1"))
  f:close()
  return path
end

-- Lines for a program: status_mib(field), a field of /proc/self/status
-- (VmRSS, VmHWM) in MiB; and sample(series), the value of one series of
-- the registry as /metrics writes it (`name{label="v",...}`), or nil.
M.STATUS_MIB = [[local function status_mib(field)
  local f = assert(io.open("/proc/self/status"))
  local kb = tonumber(f:read("a"):match(field .. ":%s*(%d+)"))
  f:close()
  return kb // 1024
end
local function sample(series)
  for line in require("luaop.core").metrics.text():gmatch("[^\n]+") do
    if line:sub(1, #series + 1) == series .. " " then return tonumber(line:sub(#series + 2)) end
  end
end
]]

-- Start `source` in the background (for controllers, which run until
-- stopped) as a trusted --program (opts.script: a sandboxed --script;
-- opts.exit: the status cleanup() expects when the spec stopped it not);
-- source may also be a list of script paths (files or directories) to pass
-- as --script flags. Returns a handle: stdout(),
-- stderr() (what it printed so far), exited(), pid(), signal([sig]),
-- stop([expect]), cleanup().
--
-- stop(expect) sends SIGTERM and waits at most opts.stop_deadline seconds
-- (default 45: luaop drains for at most 30 s) for luaop to exit, then kills it (SIGKILL) and raises with the
-- last lines it printed. It raises too when the exit status is not expect
-- (default 0; false: any), or when stderr holds a sanitizer report; else
-- it returns the status.
function M.start(source, opts)
  opts = opts or {}
  local path, scripts
  if type(source) == "table" then
    scripts = {}
    for _, p in ipairs(source) do scripts[#scripts + 1] = proc.quote(p) end
    scripts = "--script " .. table.concat(scripts, " --script ")
  else
    path = write_script(source)
    scripts = (opts.script and "--script " or "--program ") .. proc.quote(path)
  end
  local out, err = os.tmpname(), os.tmpname()
  local status = os.tmpname()
  local flags = {}
  for _, f in ipairs(opts.flags or {}) do flags[#flags + 1] = proc.quote(f) end
  -- a subshell that starts luaop, prints its pid, lets go of the pipe, and
  -- records the exit status once luaop ends
  local cmd = ("(%s %s --kubeconfig %s %s %s >%s 2>%s & echo $!; exec >/dev/null 2>&1; wait $!; echo $? >%s) &")
    :format(table.concat(proc.env_words(opts.env), " "), proc.quote(opts.bin or M.bin),
            proc.quote(kubeconfig_of(opts)), scripts, table.concat(flags, " "),
            proc.quote(out), proc.quote(err), proc.quote(status))
  os.remove(status)
  local p = assert(io.popen(cmd))
  local pid = tonumber(p:read("l"))
  p:close()
  assert(pid, "luaop did not start: " .. cmd)
  local h = {}
  local read = proc.read
  local function now() return system.gettime() end
  function h.pid() return pid end
  function h.stdout() return read(out) end
  function h.stderr() return read(err) end
  local stopped -- the exit status, once stop() has seen it
  -- Whether luaop has exited (its status is recorded).
  function h.exited() return stopped ~= nil or read(status):match("%d") ~= nil end
  local signalled
  -- Send a signal (default TERM) without waiting; stop() then only waits.
  function h.signal(sig)
    assert(not h.exited(), "luaop has exited")
    assert(os.execute(("kill -%s %d"):format(sig or "TERM", pid)))
    signalled = true
  end
  function h.stop(expect)
    if expect == nil then expect = 0 end
    if stopped then return stopped end
    if not h.exited() and not signalled then os.execute("kill -TERM " .. pid .. " 2>/dev/null") end
    local deadline = now() + (opts.stop_deadline or 45)
    while not h.exited() and now() < deadline do system.sleep(0.05) end
    if path then os.remove(path) end
    if not h.exited() then
      os.execute("kill -KILL " .. pid .. " 2>/dev/null")
      stopped = "killed" -- (failed here: cleanup() does not stop it again)
      error(("luaop (pid %d) did not exit within %g s of SIGTERM (killed)\nstderr:\n%s"):format(
        pid, opts.stop_deadline or 45, proc.tail(h.stderr(), 30)), 2)
    end
    local code = tonumber((read(status):match("%d+")))
    os.remove(status)
    stopped = code
    proc.check_sanitizers("luaop " .. scripts, h.stderr(), 2)
    if expect ~= false and code ~= expect then
      error(("luaop exited %s, expected %s\nstderr:\n%s"):format(tostring(code), tostring(expect),
        proc.tail(h.stderr(), 30)), 2)
    end
    return code
  end
  -- cleanup(): stop() it, expecting opts.exit (default 0), unless the spec
  -- did; then its files go. A sanitizer's report or another status raises
  -- (after the files are gone): nothing a process printed at its end is
  -- lost to a cleanup.
  function h.cleanup()
    local ok, e = true, nil
    if stopped == nil then ok, e = pcall(h.stop, opts.exit == nil and 0 or opts.exit) end
    os.remove(out)
    os.remove(err)
    -- (gone already when stop() ran)
    os.remove(status)
    if path then os.remove(path) end
    if not ok then error(e, 0) end
  end
  return h
end

-- The syncs of `resource` (a path segment: "configmaps") in a luaop's
-- trace log (--log-level trace): LISTs, by their responses, and watches
-- that stream the state (sendInitialEvents), as they start.
function M.syncs(log, resource)
  local n = 0
  for line in log:gmatch("[^\n]+") do
    local path = line:match('"method": "GET", "path": "([^"]*/' .. resource .. '%?[^"]*)"')
    if path and line:find("\tresponse\t") and not path:find("watch=true", 1, true) then n = n + 1 end
    if path and line:find("\tstream started\t") and path:find("sendInitialEvents=true", 1, true) then n = n + 1 end
  end
  return n
end

return M
