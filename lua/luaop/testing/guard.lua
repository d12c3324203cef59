-- luaop.testing.guard - the test kit never hangs and never fails in
-- silence: each run of the loop (core.kit.run, at every env call and every
-- step of env:advance) is bounded while its clock stands still, the test
-- has a wall deadline, and a failing test is told what the env logged.
--
--   livelock: more than MAX_RECONCILES reconciles of one controller and key
--     in one run (no virtual time passes within a run: a reconcile that
--     writes a changed value every time, `return luaop.requeue_after(0)`)
--     fails, naming the controller and the key; MAX_ITERATIONS iterations
--     of the loop in one run fail too (a task that yields for ever)
--   deadline: a run past the test's wall deadline fails (TIMEOUT seconds, or
--     LUAOP_TEST_TIMEOUT, or testing.env{deadline =}; `luaop --test` sets it
--     for each test, with --test-timeout); counted from the test's start
--     under `luaop --test` and busted (its test start event), and from
--     testing.env's call
--   report(): the reconciles' errors and the last log lines of the env
--     a test used, which `luaop --test` prints under a failure, as does
--     busted (subscribed to its test end event when busted runs the spec)
local core = require "luaop.core"

local kit = core.kit

local M = {}

-- Bounds of one run while the clock stands still; chosen far above what
-- the operators' specs reach (at most 4 reconciles of a key and 24
-- iterations of the loop in one run).
M.MAX_RECONCILES = 100
M.MAX_ITERATIONS = 100000
M.CHUNK = 100 -- iterations between two looks at the bounds
-- The wall deadline of a test, in seconds.
M.TIMEOUT = 30
-- How many log lines a failure shows.
M.LOG_LINES = 20

M.deadline = nil -- kit.clock() seconds | nil
M.timeout = nil -- the seconds the deadline was set with
M.owner = nil -- "runner" once luaop --test sets the deadlines
M.env = nil -- the env the current test made last

-- The default timeout: LUAOP_TEST_TIMEOUT, else TIMEOUT.
function M.default_timeout()
  local v = tonumber(os.getenv("LUAOP_TEST_TIMEOUT") or "")
  if v and v > 0 then return v end
  return M.TIMEOUT
end

-- A test starts: its deadline `timeout` seconds (default: default_timeout())
-- from now; owner "runner" keeps testing.env from moving it. keep_env: the
-- env its before_each made stays the one to report (busted tells of the
-- start after the before_each).
function M.test_started(timeout, owner, keep_env)
  M.timeout = timeout or M.default_timeout()
  M.deadline = kit.clock() + M.timeout
  M.owner = owner
  if not keep_env then M.env = nil end
end

-- testing.env was called: its deadline starts now, unless the runner set
-- the test's own; deadline: the env's option.
function M.env_started(env, deadline)
  M.env = env
  if deadline then
    M.timeout, M.deadline = deadline, kit.clock() + deadline
  elseif M.owner ~= "runner" then
    M.timeout = M.default_timeout()
    M.deadline = kit.clock() + M.timeout
  end
end

-- "file:line: " of the first caller outside the kit, or "".
function M.where()
  for level = 2, 64 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    if info.currentline and info.currentline > 0 and info.source:sub(1, 1) == "@"
      and not info.source:find("luaop/testing/", 1, true) then
      return ("%s:%d: "):format(info.short_src, info.currentline)
    end
  end
  return ""
end

local function fail(msg) error(M.where() .. msg, 0) end

-- The key of env's counts reconciled most, and how often: key, n.
local function busiest(counts)
  local top, n = nil, 0
  for k, v in pairs(counts or {}) do
    if v > n or (v == n and top and k < top) then top, n = k, v end
  end
  return top, n
end
M.busiest = busiest

-- "controller NAME, key KEY" of a count's key.
local function named(k)
  local controller, key = k:match("^(%S+) (.*)$")
  return ("controller %s, key %s"):format(controller, key)
end
M.named = named

local function livelock_says(k, n)
  return ("livelock: %s reconciled %d times in one run while the clock stood still (more than %d: a reconcile "
    .. "that writes a changed value every time, or returns requeue_after(0)?)"):format(named(k), n, M.MAX_RECONCILES)
end

-- Run the loop until idle (kit.run), within the bounds; env (or nil) is
-- the env the reconciles are counted for. opts.unguarded: no deadline and
-- no livelock (stopping an env). Raises what broke a bound.
function M.run(env, opts)
  local worker = require "luaop.worker"
  local counts = {}
  local unguarded = opts and opts.unguarded
  local livelock
  worker.on_reconcile = function(controller, key)
    local k = controller .. " " .. key
    local n = (counts[k] or 0) + 1
    counts[k] = n
    if env and env.advance_counts then env.advance_counts[k] = (env.advance_counts[k] or 0) + 1 end
    if n > M.MAX_RECONCILES and not livelock and not unguarded then livelock = k end
  end
  local iterations = 0
  while true do
    local n = kit.run(M.CHUNK)
    iterations = iterations + n
    if n < M.CHUNK then break end
    if livelock then
      worker.on_reconcile = nil
      fail(livelock_says(livelock, counts[livelock]))
    end
    if not unguarded and M.deadline and kit.clock() > M.deadline then
      worker.on_reconcile = nil
      local top = busiest(counts)
      fail(("the test ran past its deadline of %g s with the loop still busy%s (luaop --test --test-timeout, "
        .. "testing.env{deadline =}, LUAOP_TEST_TIMEOUT)"):format(M.timeout or M.default_timeout(),
        top and " (reconciling most: " .. named(top) .. ")" or ""))
    end
    if iterations >= (unguarded and 100 * M.MAX_ITERATIONS or M.MAX_ITERATIONS) then
      worker.on_reconcile = nil
      local top, c = busiest(counts)
      fail(("the loop still had work after %d iterations while the clock stood still (a task that yields for "
        .. "ever?)%s"):format(iterations, top and (": %s reconciled %d times"):format(named(top), c) or ""))
    end
  end
  worker.on_reconcile = nil
  if livelock then fail(livelock_says(livelock, counts[livelock])) end
  return iterations
end

-- A log line as text: LEVEL logger msg {k=v, ...}.
local function line(l)
  local keys = {}
  for k in pairs(l.fields or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = l.fields[k]
    if type(v) == "table" then
      local ok, s = pcall(core.json.encode, v)
      v = ok and s or tostring(v)
    end
    -- (a traceback's first line: the file, line and message)
    parts[#parts + 1] = ("%s=%s"):format(k, (tostring(v):match("^[^\n]*")))
  end
  local text = ("%s %s %s"):format(tostring(l.level):upper(), tostring(l.logger), tostring(l.msg))
  if #parts > 0 then text = text .. " {" .. table.concat(parts, ", ") .. "}" end
  return text
end
M.line = line

-- What env logged, for a failure: its reconciles' errors (at most 10,
-- the first ones) and its last LOG_LINES log lines; "" when it logged
-- nothing.
function M.report(env)
  env = env or M.env
  if not env or not env.logged or #env.logged == 0 then return "" end
  local out, errors = {}, {}
  for _, l in ipairs(env.logged) do
    if l.level == "error" then errors[#errors + 1] = l end
  end
  if #errors > 0 then
    out[#out + 1] = ("the env's errors (%d):"):format(#errors)
    for i = 1, math.min(#errors, 10) do out[#out + 1] = "  " .. line(errors[i]) end
    if #errors > 10 then out[#out + 1] = ("  ... and %d more"):format(#errors - 10) end
  end
  local first = math.max(1, #env.logged - M.LOG_LINES + 1)
  out[#out + 1] = ("the env's last %d log lines (env:logs() has them all):"):format(#env.logged - first + 1)
  for i = first, #env.logged do out[#out + 1] = "  " .. line(env.logged[i]) end
  return table.concat(out, "\n")
end

-- Under busted: each test's deadline from its start, and the report under
-- a failing test (as TAP's comment lines, after busted's own). Once per
-- module instance: busted loads each spec file's modules anew, and a
-- subscription of an instance no longer loaded does nothing.
function M.subscribe_busted()
  local busted = package.loaded.busted
  if type(busted) ~= "table" or type(busted.subscribe) ~= "function" or M.subscribed then return end
  M.subscribed = true
  local function current() return package.loaded["luaop.testing.guard"] == M end
  busted.subscribe({ "test", "start" }, function()
    if current() then M.test_started(nil, nil, true) end
    return nil, true
  end)
  busted.subscribe({ "test", "end" }, function(_, _, status)
    if not current() then return nil, true end
    if status == "failure" or status == "error" then
      local text = M.report()
      if text ~= "" then
        io.stdout:write("# ", (text:gsub("\n", "\n# ")), "\n")
        io.stdout:flush()
      end
    end
    M.env = nil -- (the next test's before_each makes its own)
    return nil, true
  end)
end

return M
