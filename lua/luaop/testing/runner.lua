-- luaop.testing.runner - `luaop --test FILE|DIR...`: run spec files for authors
-- without busted. A spec file is busted's kind, in a subset: describe, it,
-- before_each, after_each, pending, and assert with luassert's common
-- checks (equal, same, is_true, is_false, is_nil, truthy, falsy, matches,
-- has_error, each also negated: assert.is_not.equal, assert.is_not_nil).
-- So the same file runs under busted too. A directory holds spec files
-- named *_spec.lua or *_test.lua. Prints one TAP line a test, each
-- failure's message (an error value that is not a string at the spec's
-- file and line) and what the test's env logged (luaop.testing.guard), and
-- ends with "N passed, N failed"; exit 1 on any failure. Each test has a
-- wall deadline (--test-timeout, default 30 s), kept by a count hook even
-- in a loop of its own.
local core = require "luaop.core"

local M = {}

-- ---- assert ---------------------------------------------------------------------

local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "table" then
    local ok, s = pcall(core.json.encode, v)
    if ok then return s end
  end
  return tostring(v)
end

local function same(a, b)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  for k, v in pairs(a) do
    if not same(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

-- name -> function(...) -> holds, what it says of the values when they
-- fail it, and when they fail it negated
local checks = {
  equal = function(want, got)
    return want == got, ("expected %s, got %s"):format(show(want), show(got)),
      ("expected a value other than %s, got %s"):format(show(want), show(got))
  end,
  same = function(want, got)
    return same(want, got), ("expected the same as %s, got %s"):format(show(want), show(got)),
      ("expected a value not the same as %s, got %s"):format(show(want), show(got))
  end,
  ["true"] = function(v)
    return v == true, ("expected true, got %s"):format(show(v)), "expected a value other than true, got true"
  end,
  ["false"] = function(v)
    return v == false, ("expected false, got %s"):format(show(v)), "expected a value other than false, got false"
  end,
  ["nil"] = function(v)
    return v == nil, ("expected nil, got %s"):format(show(v)), "expected a non-nil value, got nil"
  end,
  truthy = function(v)
    return not not v, ("expected a truthy value, got %s"):format(show(v)),
      ("expected a falsy value, got %s"):format(show(v))
  end,
  falsy = function(v)
    return not v, ("expected a falsy value, got %s"):format(show(v)),
      ("expected a truthy value, got %s"):format(show(v))
  end,
  matches = function(pattern, s)
    return type(s) == "string" and s:find(pattern) ~= nil, ("expected %s to match %s"):format(show(s), show(pattern)),
      ("expected %s not to match %s"):format(show(s), show(pattern))
  end,
  error = function(fn, want)
    local ok, err = pcall(fn)
    if ok then return false, "expected an error, got none" end
    if want ~= nil and not (type(err) == "string" and err:find(want, 1, true)) and not same(want, err) then
      return false, ("expected the error %s, got %s"):format(show(want), show(err))
    end
    return true, nil, ("expected no error, got %s"):format(show(err))
  end,
}
checks.equals, checks.are_same = checks.equal, checks.same
checks.has_error, checks.errors, checks.match = checks.error, checks.error, checks.matches
local filler = { is = true, are = true, has = true, was = true, does = true, to = true, be = true }

-- assert(v, msg) as Lua's; assert.<words>(...) as luassert's, where words
-- are joined by "." or "_", "not" negates and is/are/has/... are filler.
local function chain(negate)
  return setmetatable({}, {
    __call = function(_, v, msg, ...)
      if not v then error(msg or "assertion failed!", 2) end
      return v, msg, ...
    end,
    __index = function(_, key)
      local neg, name = negate, {}
      for w in key:gmatch("[^_]+") do
        if w == "not" or w == "no" then neg = not neg elseif not filler[w] then name[#name + 1] = w end
      end
      if #name == 0 then return chain(neg) end
      local check = checks[table.concat(name, "_")] or checks[name[#name]]
      if not check then error("assert." .. key .. " is not a check luaop --test knows", 2) end
      return function(...)
        local n = select("#", ...)
        local arity = debug.getinfo(check, "u").nparams
        local msg = n > arity and select(arity + 1, ...) or nil
        local holds, says, negated = check(...)
        if holds == neg then
          error((msg and msg .. ": " or "") .. (neg and negated or says), 2)
        end
      end
    end,
  })
end
M.assert = chain(false)

-- ---- files of specs ---------------------------------------------------------------

-- The spec files the paths name: files as given, and in each directory
-- (and the directories below it, as busted looks) its *_spec.lua and
-- *_test.lua, sorted. (Read at once, with core.kit's blocking kind and
-- list.) files | nil, what could not be read.
local function spec_files(paths)
  local files = {}
  local function walk(dir, depth)
    local names, lerr = core.kit.list(dir)
    if not names then error("cannot list " .. dir .. ": " .. tostring(lerr), 0) end
    table.sort(names)
    for _, name in ipairs(names) do
      local path = dir:gsub("/+$", "") .. "/" .. name
      local kind = not name:match("^%.") and core.kit.kind(path)
      if kind == "directory" and depth < 16 then
        walk(path, depth + 1)
      elseif kind == "file" and (name:match("_spec%.lua$") or name:match("_test%.lua$")) then
        files[#files + 1] = path
      end
    end
  end
  local ok, e = pcall(function()
    for _, p in ipairs(paths) do
      local kind, kerr = core.kit.kind(p)
      if not kind then error("cannot read " .. tostring(kerr), 0) end
      if kind == "directory" then walk(p, 0) else files[#files + 1] = p end
    end
  end)
  if not ok then return nil, tostring(e) end
  return files
end

-- Run the spec files the paths name; the exit status. opts.timeout: each
-- test's wall deadline in seconds (--test-timeout).
function M.main(paths, opts)
  M.timeout = opts and opts.timeout or nil
  local files, err = spec_files(paths)
  if not files then
    io.stderr:write("luaop --test: ", tostring(err), "\n")
    return 1
  end
  if #files == 0 then
    io.stderr:write("luaop --test: no *_spec.lua or *_test.lua in ", table.concat(paths, ", "), "\n")
    return 1
  end
  return M.run_files(files)
end

-- The tests of one file: {name, fn, befores, afters} each, in order.
local function collect(path, env)
  local tests, stack = {}, { { name = nil, before = {}, after = {} } }
  local function scope() return stack[#stack] end
  local function full(name)
    local parts = {}
    for _, s in ipairs(stack) do parts[#parts + 1] = s.name end
    parts[#parts + 1] = name
    return table.concat(parts, " ")
  end
  env.describe = function(name, fn)
    stack[#stack + 1] = { name = name, before = {}, after = {} }
    fn()
    stack[#stack] = nil
  end
  env.context = env.describe
  env.before_each = function(fn) table.insert(scope().before, fn) end
  env.after_each = function(fn) table.insert(scope().after, fn) end
  env.it = function(name, fn)
    local befores, afters = {}, {}
    for _, s in ipairs(stack) do
      for _, f in ipairs(s.before) do befores[#befores + 1] = f end
    end
    for i = #stack, 1, -1 do
      for _, f in ipairs(stack[i].after) do afters[#afters + 1] = f end
    end
    tests[#tests + 1] = { name = full(name), fn = fn, befores = befores, afters = afters, path = path }
  end
  env.pending = function(name) tests[#tests + 1] = { name = full(name), pending = true, path = path } end
  return tests
end

-- What an error value says: a string as it is; a value with __tostring
-- (an API error: "Reason (code): message") through it; anything else as
-- show() writes it.
local function message(e)
  if type(e) == "string" then return e end
  local mt = getmetatable(e)
  if type(mt) == "table" and mt.__tostring then
    local ok, text = pcall(tostring, e)
    if ok and type(text) == "string" then return text end
  end
  return show(e)
end

-- What a test of `path` that failed in thread co says: a value that is
-- not a string (assert(env:create(obj)) raises the API error itself) is
-- told with the file and line of the spec where it was raised (the dead
-- thread's stack is still there to read).
-- The deadline's error, raised wherever the thread was (in the kit, say),
-- is told at the spec's line too.
local function located(path, co, e)
  local deadline = type(e) == "string" and e:match("^[^\n]-:%d+: (the test's deadline of [^\n]*)$")
  if type(e) == "string" and not deadline then return e end
  for level = 0, 64 do
    local info = debug.getinfo(co, level, "Sl")
    if not info then break end
    if info.source == "@" .. path and info.currentline > 0 then
      return ("%s:%d: %s"):format(info.short_src, info.currentline, deadline or message(e))
    end
  end
  return deadline and e or message(e)
end

-- The wall deadline of each test (luaop --test --test-timeout), in seconds.
M.timeout = nil

-- Run fn in a coroutine of its own under the test's deadline: once it
-- passed, its next instruction raises, and every one after it, even in a
-- loop of the test's own that never calls the kit and catches errors with
-- pcall (core.kit.alarm: a signal sets the hook then; a count hook checking
-- the clock all along cost 3% of the operators' specs); the coroutine
-- ends, and is closed. ok, what it raised (as located() tells it).
local function with_deadline(path, fn)
  local co = coroutine.create(fn)
  core.kit.alarm(M.timeout, ("the test's deadline of %g s passed (luaop --test --test-timeout DURATION)")
    :format(M.timeout), co)
  local ok, err = coroutine.resume(co)
  core.kit.alarm()
  if not ok then err = located(path, co, err) end
  if ok and coroutine.status(co) ~= "dead" then
    ok, err = false, path .. ": the test yielded (a coroutine.yield outside a coroutine of its own), so it never ended"
  end
  coroutine.close(co)
  return ok, err
end

-- Run every test of the files; print TAP and the tally; the exit status.
function M.run_files(files)
  local guard = require "luaop.testing.guard"
  if not M.timeout then
    local ok, t = pcall(guard.default_timeout)
    if not ok then
      io.stderr:write("luaop --test: ", tostring(t), "\n")
      return 1
    end
    M.timeout = t
  end
  local n, passed, failed, skipped = 0, 0, 0, 0
  local t0 = os.clock()
  for _, path in ipairs(files) do
    local env = setmetatable({ assert = M.assert }, { __index = _G })
    local tests = collect(path, env)
    local chunk, lerr = loadfile(path, "t", env)
    local ok, err = chunk ~= nil, lerr
    if chunk then ok, err = xpcall(chunk, debug.traceback) end
    -- a file that is no spec and defines no test: a script given by mistake
    -- (it would pass, testing nothing, or fail on its own require)
    local script = #tests == 0 and not (path:match("_spec%.lua$") or path:match("_test%.lua$"))
    if script then
      ok, err = false, ("%s defines no test (describe, it): luaop --test runs specs; a script is tested by a spec "
        .. "that loads it with testing.env { script = %q }%s"):format(path, path:match("[^/]*$"),
        ok and "" or "\n" .. message(err))
    end
    if not ok then
      n, failed = n + 1, failed + 1
      io.stdout:write(("not ok %d - %s\n# %s\n"):format(n, path, (message(err):gsub("\n", "\n# "))))
    end
    for _, t in ipairs(ok and tests or {}) do
      n = n + 1
      if t.pending then
        skipped = skipped + 1
        io.stdout:write(("ok %d - %s # SKIP pending\n"):format(n, t.name))
      else
        guard.test_started(M.timeout, "runner")
        local tok, terr = with_deadline(path, function()
          for _, f in ipairs(t.befores) do f() end
          t.fn()
        end)
        -- (the env the test made, before after_each stops it)
        local report = not tok and guard.report() or ""
        local note = tok and guard.errors_note() or ""
        for _, f in ipairs(t.afters) do
          local aok, aerr = with_deadline(path, f)
          if not aok and tok then tok, terr = false, aerr end
        end
        if tok then
          passed = passed + 1
          io.stdout:write(("ok %d - %s\n"):format(n, t.name))
          if note ~= "" then io.stdout:write("# ", note, "\n") end
        else
          failed = failed + 1
          if report == "" then report = guard.report() end
          io.stdout:write(("not ok %d - %s\n# %s\n"):format(n, t.name, (message(terr):gsub("\n", "\n# "))))
          if report ~= "" then io.stdout:write("# ", (report:gsub("\n", "\n# ")), "\n") end
        end
        guard.env, guard.owner = nil, nil
      end
    end
  end
  io.stdout:write(("1..%d\n"):format(n))
  local skips = skipped > 0 and (", %d skipped"):format(skipped) or ""
  io.stdout:write(("%d passed, %d failed%s\n"):format(passed, failed, skips))
  io.stderr:write(("luaop --test: %d file%s in %.2f s of CPU\n"):format(#files, #files == 1 and "" or "s",
    os.clock() - t0))
  io.stdout:flush()
  return failed == 0 and 0 or 1
end

return M
