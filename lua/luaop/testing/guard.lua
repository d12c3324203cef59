-- luaop.testing.guard - the test kit never hangs and never fails in
-- silence: each run of the loop (core.kit.run, at every env call and every
-- step of env:advance) is bounded while its clock stands still, the test
-- has a wall deadline, and a failing test is told what the env logged.
--
--   livelock: a key reconciled again and again in one run (no virtual time
--     passes within a run) while nothing is created or deleted: more than
--     MAX_RECONCILES (or testing.env{max_reconciles =}) reconciles of one
--     controller and key in a row, each started with no create or delete
--     served since the one before (a reconcile that writes a changed value
--     every time; `return luaop.requeue_after(0)`, told as such from its
--     result) fails, naming the controller, the key and the bound. A
--     reconcile that creates or deletes is progress (an ordered rollout:
--     one child each time), so a loop that creates and deletes for ever is
--     left to MAX_ITERATIONS iterations of the loop in one run (as is a task
--     that yields for ever) and to the deadline
--   deadline: a run past the test's wall deadline fails, checked as a run
--     starts, every CHUNK iterations and as it ends (TIMEOUT seconds, or
--     LUAOP_TEST_TIMEOUT, a duration, or testing.env{deadline =}; `luaop
--     --test` sets it for each test, with --test-timeout, and stops the
--     test's own code too: runner.lua); counted from the test's start under
--     `luaop --test` and busted (its test start event), and from
--     testing.env's call
--   report(): the reconciles' errors and the last log lines of the env
--     a test used, which `luaop --test` prints under a failure, as does
--     busted (subscribed to its test end event when busted runs the spec)
local core = require "luaop.core"

local kit = core.kit

local M = {}

-- Bounds of one run while the clock stands still; chosen far above what
-- the operators' specs reach (at most 4 reconciles of a key in a row and
-- 24 iterations of the loop in one run).
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

-- The default timeout: LUAOP_TEST_TIMEOUT (a duration, as --test-timeout
-- reads one: "30s", "2m", "1.5"), else TIMEOUT. Raises when it is set and
-- is not one.
function M.default_timeout()
  local text = os.getenv("LUAOP_TEST_TIMEOUT")
  if text == nil or text == "" then return M.TIMEOUT end
  local v, why = kit.duration(text)
  if not v then error("LUAOP_TEST_TIMEOUT: " .. why, 0) end
  return v
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

-- The kit's own chunks: the chunk name of this file but its name (the
-- embedded modules' "@lua/luaop/testing/", lua/'s own path under busted),
-- then a module's file name; not a substring anywhere (a user's spec under
-- a directory named luaop/testing/ is the user's).
local KIT = debug.getinfo(1, "S").source:match("^(@.*)guard%.lua$")
function M.is_kit(source)
  if not KIT or source:sub(1, #KIT) ~= KIT then return false end
  local rest = source:sub(#KIT + 1)
  return (rest:match("^[%a_]+%.lua$") or rest:match("^apiserver/[%a_]+%.lua$"))
    and not rest:match("_spec%.lua$") and not rest:match("_test%.lua$") or false
end
local is_kit = M.is_kit

-- text without its stack tracebacks that show only luaop's own frames
-- (a definition refused at load: the message names the script's line, and
-- a traceback of luaop's files says nothing more to the script's author).
local LUAOP = KIT and KIT:sub(2):gsub("testing/$", "") -- "lua/luaop/"
function M.trim(text)
  if type(text) ~= "string" or not LUAOP then return text end
  local parts = {}
  for part in (text .. "\nstack traceback:\n"):gmatch("(.-)\nstack traceback:\n") do parts[#parts + 1] = part end
  local out = { parts[1] }
  for i = 2, #parts do
    local own = true
    for l in parts[i]:gmatch("[^\n]+") do
      local f = l:match("^%s*(.-)%s*$")
      if not (f:sub(1, 3) == "[C]" or f:sub(1, #LUAOP) == LUAOP or f == "(...tail calls...)") then own = false end
    end
    if not own then out[#out + 1] = parts[i] end
  end
  return table.concat(out, "\nstack traceback:\n")
end

-- "file:line: " of the first caller outside the kit, or "".
function M.where()
  for level = 2, 64 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    if info.currentline and info.currentline > 0 and info.source:sub(1, 1) == "@"
      and not is_kit(info.source) then
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

local function times(n) return n == 1 and "1 time" or ("%d times"):format(n) end

local function livelock_says(k, n, bound, zero)
  return ("livelock: %s reconciled %s in a row in one run with nothing created or deleted meanwhile while the "
    .. "clock stood still (more than max_reconciles = %d: testing.env{max_reconciles =})%s"):format(named(k), times(n),
    bound, zero and ": its reconcile returns requeue_after(0) every time (wait for an event, or requeue_after a time)"
    or " (a reconcile that writes a changed value every time?)")
end

local function past_deadline(counts)
  local top = busiest(counts)
  fail(("the test's deadline of %g s passed%s (luaop --test --test-timeout, testing.env{deadline =}, "
    .. "LUAOP_TEST_TIMEOUT)"):format(M.timeout or M.default_timeout(),
    top and " with the loop still busy (reconciling most: " .. named(top) .. ")" or ""))
end

-- The result of each reconcile, by its function (the env's definitions:
-- env.reconcilers, function -> controller name) and request: whether it
-- returned requeue_after(0). Wraps luaop.worker's reconcile while a run
-- counts.
local state -- the current run's {zero =, names =} | nil
local unwrapped = setmetatable({}, { __mode = "k" }) -- a wrapper -> luaop.worker's own reconcile
local function count_results(worker)
  local reconcile = worker.reconcile
  reconcile = unwrapped[reconcile] or reconcile -- (a run a deadline ended left its wrapper)
  local function counted(fn, ctx, req)
    local r = reconcile(fn, ctx, req)
    local st = state
    local name = st and st.names[fn]
    if name and type(req) == "table" then
      local k = name .. " " .. (req.namespace and req.namespace .. "/" .. req.name or tostring(req.name))
      st.zero[k] = type(r) == "table" and r.requeue_after == 0 or nil
    end
    return r
  end
  unwrapped[counted] = reconcile
  worker.reconcile = counted
  return reconcile
end

-- Run the loop until idle (kit.run), within the bounds; env (or nil) is
-- the env the reconciles are counted for. opts.unguarded: no deadline and
-- no livelock (stopping an env). Raises what broke a bound.
function M.run(env, opts)
  local counts, streak, seen = {}, {}, {}
  local unguarded = opts and opts.unguarded
  local bound = env and env.max_reconciles or M.MAX_RECONCILES
  local livelock, livelock_n
  if not unguarded and M.deadline and kit.clock() > M.deadline then past_deadline() end
  local st = { zero = {}, names = env and env.reconcilers or {} }
  state = st
  local worker = require "luaop.worker"
  local reconcile = count_results(worker)
  worker.on_reconcile = function(controller, key)
    local k = controller .. " " .. key
    counts[k] = (counts[k] or 0) + 1
    if env and env.advance_counts then env.advance_counts[k] = (env.advance_counts[k] or 0) + 1 end
    -- progress: a create or delete served since this key's last reconcile
    local p = env and env.progress or 0
    streak[k] = seen[k] == p and (streak[k] or 0) + 1 or 0
    seen[k] = p
    if streak[k] > bound and not livelock and not unguarded then livelock, livelock_n = k, streak[k] end
  end
  local function done()
    worker.on_reconcile, worker.reconcile, state = nil, reconcile, nil
  end
  local iterations = 0
  while true do
    local n = kit.run(M.CHUNK)
    iterations = iterations + n
    if n < M.CHUNK then break end
    if livelock then
      done()
      fail(livelock_says(livelock, livelock_n, bound, st.zero[livelock]))
    end
    if not unguarded and M.deadline and kit.clock() > M.deadline then
      done()
      past_deadline(counts)
    end
    if iterations >= (unguarded and 100 * M.MAX_ITERATIONS or M.MAX_ITERATIONS) then
      done()
      local top, c = busiest(counts)
      fail(("the loop still had work after %d iterations while the clock stood still (a task that yields for "
        .. "ever?)%s"):format(iterations, top and (": %s reconciled %s"):format(named(top), times(c)) or ""))
    end
  end
  done()
  if livelock then fail(livelock_says(livelock, livelock_n, bound, st.zero[livelock])) end
  if not unguarded and M.deadline and kit.clock() > M.deadline then past_deadline(counts) end
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

-- For a test that passed: a note of the errors its controllers logged
-- (a reconcile that raised, an event handler or watch map that failed),
-- which no assertion may have looked at (`return luaop.requeue_after`, the
-- function, passes every test that checks nothing else); "" when none.
function M.errors_note(env)
  env = env or M.env
  local n, first = 0, nil
  for _, l in ipairs(env and env.logged or {}) do
    if l.level == "error" and (l.msg == "Reconciler error" or l.msg == "event handler failed") then
      n = n + 1
      first = first or l
    end
  end
  if n == 0 then return "" end
  return ("note: the controllers logged %d error%s (env:logs { level = \"error\" } has them), the first: %s")
    :format(n, n == 1 and "" or "s", line(first))
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

-- One step of env:advance towards a wait due in due seconds, left short of
-- the end: to the nearest microsecond, never short of due nor past the end
-- (due times are monotonic seconds as doubles, a nanosecond either side of
-- a whole microsecond: rounding up put a microsecond on every wait).
function M.step(due, left)
  return math.max(due, math.min(left, math.floor(due * 1e6 + 0.5) / 1e6))
end

return M
