-- spec/support/proc.lua - run a command and capture what it printed, with a
-- deadline, failing on any sanitizer report.
local proc = {}

-- Seconds a command may run before it is killed and its spec fails.
proc.deadline = 120

-- What every child gets: the sanitizers' reports fail with an exit code of
-- their own (not 1, which many specs expect from luaop), leaks are looked
-- for whatever the spec runner's own process was told, UBSan stops at the
-- first error. Harmless for a binary built without them.
proc.sanitizer_env = {
  ASAN_OPTIONS = "detect_leaks=1:exitcode=86:abort_on_error=0",
  LSAN_OPTIONS = "exitcode=86",
  UBSAN_OPTIONS = "halt_on_error=1:print_stacktrace=1:exitcode=87",
}

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
proc.quote = quote

-- A file's text ("" when it cannot be read).
function proc.read(path)
  local f = io.open(path, "r")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

-- Write text to the file dir/name (raises when it cannot); its path.
function proc.write(dir, name, text)
  local path = dir .. "/" .. name
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

-- The lines of the file at path (none when it does not exist).
function proc.lines(path)
  local lines = {}
  for l in proc.read(path):gmatch("[^\n]+") do lines[#lines + 1] = l end
  return lines
end

-- Run a shell command line under a deadline (seconds, default
-- proc.deadline); returns ok and what it printed (stdout and stderr). Past
-- the deadline it is killed and this raises.
function proc.sh(cmd, deadline)
  deadline = deadline or proc.deadline
  local p = assert(io.popen(("timeout -k 5 %d sh -c %s 2>&1"):format(deadline, quote(cmd)), "r"))
  local out = p:read("a")
  local ok, _, code = p:close()
  if code == 124 or code == 137 then
    error(("%s did not exit within %g s (killed)\n%s"):format(cmd, deadline, proc.tail(out)), 2)
  end
  return ok == true, out
end

-- The last n lines of s.
function proc.tail(s, n)
  local lines = {}
  for l in (s or ""):gmatch("[^\n]*\n?") do
    if l ~= "" then lines[#lines + 1] = l end
  end
  return table.concat(lines, "", math.max(1, #lines - (n or 20) + 1))
end

-- The first line of a sanitizer report in s (AddressSanitizer,
-- LeakSanitizer, UndefinedBehaviorSanitizer), or nil.
function proc.sanitizer_report(s)
  if not s then return nil end
  for _, p in ipairs {
    "[^\n]*ERROR: AddressSanitizer[^\n]*", "[^\n]*ERROR: LeakSanitizer[^\n]*",
    "[^\n]*%S+:%d+:%d+: runtime error: [^\n]*", "[^\n]*SUMMARY: UndefinedBehaviorSanitizer[^\n]*",
  } do
    local m = s:match(p)
    if m then return m end
  end
  return nil
end

-- Raise (at the spec's level) if stderr holds a sanitizer report.
function proc.check_sanitizers(what, stderr, level)
  local report = proc.sanitizer_report(stderr)
  if report then
    error(("%s: sanitizer report: %s\n%s"):format(what, report, proc.tail(stderr, 40)), (level or 1) + 1)
  end
end

-- The shell words that set the environment: `env -u LD_PRELOAD` (the child
-- does not inherit a sanitizer runtime preloaded into the spec runner), the
-- sanitizer options, then env ({NAME = value} to set, {NAME = false} to unset).
function proc.env_words(env)
  local parts = { "env", "-u", "LD_PRELOAD" }
  -- env takes its -u options before any NAME=value
  for k, v in pairs(env or {}) do
    if v == false then
      parts[#parts + 1] = "-u"
      parts[#parts + 1] = quote(k)
    end
  end
  for k, v in pairs(proc.sanitizer_env) do
    if not env or env[k] == nil then parts[#parts + 1] = quote(k .. "=" .. v) end
  end
  for k, v in pairs(env or {}) do
    if v ~= false then parts[#parts + 1] = quote(k .. "=" .. v) end
  end
  return parts
end

-- A fresh directory of its own (mktemp -d); remove it with proc.sh("rm -rf ...").
function proc.tempdir()
  local p = assert(io.popen("mktemp -d"))
  local dir = p:read("l")
  p:close()
  assert(dir and dir ~= "", "mktemp -d failed")
  return dir
end

-- A TCP port free on `addr` (default 127.0.0.1) now, for a server that
-- cannot report a port 0 it got.
function proc.free_port(addr)
  local ok, out = proc.sh(([[python3 -c 'import socket; s = socket.socket(); s.bind(("%s", 0)); print(s.getsockname()[1])']])
    :format(addr or "127.0.0.1"))
  assert(ok, out)
  return tonumber(out)
end

-- Start `cmd` in the background, its output to `log`, killed after
-- `deadline` seconds (default proc.deadline) should the spec never stop it;
-- returns its pid (that of the `timeout` around it) and a stop function.
function proc.background(cmd, log, deadline)
  local p = assert(io.popen(("timeout -k 5 %d %s >%s 2>&1 & echo $!"):format(deadline or proc.deadline, cmd,
    quote(log or "/dev/null"))))
  local pid = assert(tonumber(p:read("l")), "could not start " .. cmd)
  p:close()
  return pid, function()
    os.execute(("kill %d 2>/dev/null; timeout 5 tail --pid=%d -f /dev/null; kill -9 %d 2>/dev/null"):format(pid, pid, pid))
  end
end

-- Run argv; returns exit code, stdout, stderr. env: see env_words.
-- opts.deadline: seconds (default proc.deadline); past it the command is
-- killed (SIGTERM, SIGKILL 5 s later) and this raises with the command and
-- the last lines it printed. A sanitizer report on stderr raises too, unless
-- opts.sanitizer_ok.
function proc.run(argv, env, opts)
  opts = opts or {}
  local deadline = opts.deadline or proc.deadline
  local parts = proc.env_words(env)
  for _, w in ipairs { "timeout", "-k", "5", tostring(deadline) } do parts[#parts + 1] = w end
  local words = {}
  for _, a in ipairs(argv) do words[#words + 1] = quote(a) end
  for _, w in ipairs(words) do parts[#parts + 1] = w end
  local err = os.tmpname()
  local p = assert(io.popen(table.concat(parts, " ") .. " 2>" .. quote(err), "r"))
  local out = p:read("a")
  local _, _, code = p:close()
  local f = assert(io.open(err, "r"))
  local stderr = f:read("a")
  f:close()
  os.remove(err)
  local cmd = table.concat(words, " ")
  if code == 124 or code == 137 then
    error(("%s did not exit within %g s (killed)\nstdout:\n%s\nstderr:\n%s"):format(
      cmd, deadline, proc.tail(out), proc.tail(stderr)), 2)
  end
  if not opts.sanitizer_ok then proc.check_sanitizers(cmd, stderr, 2) end
  return code, out, stderr
end

-- A shell command that sleeps `seconds` in the foreground, as `sleep`
-- does, writing the sleep's pid to `pidfile`: for a program that blocks in
-- os.execute. proc.end_sleep(pidfile) ends that sleep alone, whoever its
-- parent is by then (a pattern, pkill -f, would end other runs' too).
function proc.blocking_sleep(seconds, pidfile)
  return ("sleep %s & echo $! >%s; wait"):format(seconds, quote(pidfile))
end

function proc.end_sleep(pidfile)
  local pid = proc.read(pidfile):match("^(%d+)")
  os.remove(pidfile)
  if pid then
    os.execute(("[ \"$(ps -o comm= -p %s)\" = sleep ] && kill %s 2>/dev/null"):format(pid, pid))
  end
end

-- An HTTP request to url with curl (method default GET): status, body
-- ("" and 0 when there is no answer within 5 s).
function proc.http(url, method)
  local body = os.tmpname()
  -- (HEAD as curl -I: -X HEAD would wait for a body that never comes)
  local m = method == "HEAD" and "-I" or "-X " .. (method or "GET")
  local ok, out = proc.sh(("curl -s -m 5 %s -o %s -w '%%{http_code}' %s"):format(m, proc.quote(body), proc.quote(url)))
  local text = proc.read(body) or ""
  os.remove(body)
  return tonumber(ok and out or "0") or 0, text
end

-- The working directory, as the kernel has it (not $PWD, which a
-- process started with `env -i` and no shell does not have).
function proc.cwd()
  local p = assert(io.popen("pwd -P"))
  local dir = p:read("l")
  p:close()
  return dir
end

return proc
