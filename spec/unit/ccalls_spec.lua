-- Long C calls: the libraries' work done in C is charged to budgets
-- (src/charge.h, docs/security.md "Budgets"). Each attack loops in a call
-- the count hook never fires in (a collection, a sort, a plain find, ...),
-- in a script of its own (--script DIR) reconciling cm-0 beside a steady
-- controller that ticks on cm-1. Each attack's reconcile fails with the
-- instruction budget's error at its line; luaop does not exit (before,
-- the watchdog ended the whole process with status 70 within 10 s); the
-- steady controller never waits a second; SIGTERM ends luaop within its
-- grace period. Against the fake API server (ConfigMaps cm-0 .. cm-4).
local luaop = require "support.luaop"
local kube = require "support.kube"
local attack = require "support.attacks"

-- name -> the attack, run by a reconcile of cm-0 (every loop is in C)
local acceptance = {
  -- a full collection of a large live heap, over and over
  collect = [[local keep = {} for i = 1, 300000 do keep[i] = { i } end
    while true do collectgarbage("collect") end]],
  -- a sort of a large table of numbers (C comparisons), over and over
  sort = [[local t = {} for i = 1, 200000 do t[i] = (i * 7919) % 1000003 end
    while true do table.sort(t) end]],
}

-- the other charged calls, by library, each group in a process of its own
-- (at --max-instructions 2 * 10^6: every attacker's setup fits, and all of
-- them failing back to back at the start stay well under a second)
local others = {
  tables = {
    step = [[while true do collectgarbage("step") end]],
    sortstrings = [[local s = ("x"):rep(200000) local t = {} for i = 1, 1000 do t[i] = s end
      while true do table.sort(t) end]],
    concat = [[local t = {} for i = 1, 100000 do t[i] = "" end while true do table.concat(t) end]],
    insert = [[table.insert(setmetatable({}, { __len = function() return 2^40 end }), 1, 1)]],
    move = [[table.move({}, 1, 2^40, 2)]],
    unpack = [[local t = {} for i = 1, 100000 do t[i] = i end while true do table.unpack(t) end]],
  },
  -- the JSON codec, luaop.json: C only (cjson's Lua wrapper walks what it
  -- is given, so the count hook fires there anyway)
  codecs = {
    encode = [[local t = {} for i = 1, 100000 do t[i] = i end
      while true do luaop.json.encode(t) end]],
    decode = [[local s = "[" .. ("1,"):rep(100000) .. "1]"
      while true do luaop.json.decode(s) end]],
    -- a value whose JSON is made and then cannot be (a function at its end):
    -- the work is done, the line short
    log = [[local t = {} for i = 1, 100000 do t[i] = i end t[#t + 1] = print
      while true do ctx.log:info("x", { t = t }) end]],
  },
  strings = {
    rep = [[while true do local _ = ("x"):rep(200000) end]],
    upper = [[local s = ("x"):rep(200000) while true do local _ = s:upper() end]],
    quoted = [[local s = ("x"):rep(100000) while true do local _ = ("%q"):format(s) end]],
    gsub = [[local s = ("x"):rep(100000) while true do local _ = s:gsub("()", ("%1"):rep(10000)) end]],
    find = [[local s, p = ("a"):rep(200000), ("a"):rep(100000) .. "b" while true do s:find(p, 1, true) end]],
    backref = [[local s = ("a"):rep(100000) while true do s:find("(.*)%1x") end]],
    byte = [[local s = ("x"):rep(100000) while true do s:byte(1, -1) end]],
    unpackz = [[local s = ("x"):rep(200000) while true do pcall(string.unpack, "z", s) end]],
  },
  base = {
    tostring = [[local o = setmetatable({}, { __name = ("x"):rep(200000) }) while true do tostring(o) end]],
    tonumber = [[local s = ("1"):rep(200000) while true do tonumber(s) end]],
    load = [[local s = ("x=1 "):rep(20000) while true do load(s) end]],
    rawequal = [[local a, b = ("x"):rep(200000), ("x"):rep(200000) while true do rawequal(a, b) end]],
    utf8len = [[local s = ("\x80"):rep(200000) while true do utf8.len(s, 1, -1, true) end]],
    utf8codes = [[local s = "a" .. ("\x80"):rep(200000) local f = utf8.codes(s, true)
      while true do pcall(f, s, 1) end]],
    utf8offset = [[local s = "a" .. ("\x80"):rep(200000) while true do utf8.offset(s, 2) end]],
    date = [[local f = ("%c"):rep(100000) while true do os.date(f) end]],
  },
}

-- The longest the steady controller may wait: a second on the release
-- build; the ASan build runs the same budget about 2.5 times slower.
local GAP = luaop.bin:find("asan", 1, true) and 2.5 or 1

-- Run the attacks beside the steady controller; `budget` the instruction
-- budget they fail with (the default, or --max-instructions'). Every
-- attack fails twice with it, at its file; luaop stays up; the steady
-- controller ticks on with no gap of a second (GAP, or `gap`); SIGTERM ends
-- luaop in time.
local function contained(attacks, budget, flags, gap)
  local files = { ["steady.lua"] = attack.steady }
  for name, body in pairs(attacks) do files["attack-" .. name .. ".lua"] = attack.script(name, body) end
  local run = attack.start(files, flags)
  finally(run.cleanup)
  local what = ("instruction budget of %d exceeded"):format(budget):gsub("%p", "%%%0")
  local missing
  local waited, err = pcall(kube.wait_for, "every attack's errors", 90, function()
    assert(not run.exited(), "luaop exited: " .. run.stderr():sub(-2000))
    local e = run.stderr()
    for name in pairs(attacks) do
      missing = name
      local _, n = e:gsub("attack%-" .. name .. "%.lua:%d+: " .. what, "")
      if n < 2 then return nil end
    end
    return e
  end)
  assert(waited, ("%s: attack %s\n%s"):format(err, missing, run.stderr():sub(-3000)))
  -- a reconcile's error and nothing else: no watchdog
  assert.is_nil(err:find("without waiting for too long", 1, true), err)
  for name in pairs(attacks) do
    assert.matches("controller%.attack%-" .. name .. "\tReconciler error", err)
  end
  -- the steady controller reconciled all along: no gap of GAP between ticks
  attack.check_steady(run, gap or GAP, 5)
  local log = attack.check_stop(run)
  assert.is_nil(log:find("without waiting for too long", 1, true), log)
end

-- The functions docs/security.md's table of work done in C names: each
-- backquoted name of a row's first cell, a bare one (`sub`) taking the
-- library of the name before it (`string.len`, `sub`).
local function documented()
  local f = assert(io.open("docs/security.md"))
  local doc = f:read("a")
  f:close()
  local section = assert(doc:match("\n### Work done in C\n(.-)\n##"), "no section 'Work done in C'")
  local names = {}
  for cell in section:gmatch("\n| ([^|]+) |") do
    local lib
    for name in cell:gmatch("`([%w_.*]+)`") do
      local l = name:match("^([%w_]+)%.")
      if l then lib = l elseif lib then name = lib .. "." .. name end
      names[name] = true
    end
  end
  return names
end

describe("long C calls", function()
  it("are each accounted for in docs/security.md: every function a script reaches has a row", function()
    local f = assert(io.open("spec/unit/sandbox_spec.lua"))
    local allowed = assert(f:read("a"):match("local ALLOWED = %[%[\n(.-)%]%]"))
    f:close()
    local names, missing, n = documented(), {}, 0
    for path in allowed:gmatch("_G%.([%w_.]+) function") do
      local lib = path:match("^([%w_]+)%.")
      if not (names[path] or lib and names[lib .. ".*"]) then missing[#missing + 1] = path end
      n = n + 1
    end
    assert.is_true(n > 80, "the sandbox spec's allowlist lists " .. n .. " functions")
    assert.are.same({}, missing)
  end)

  it("end a reconcile looping on a full collection or a sort with the default budget's error, and nothing else", function()
    -- one attacker per process: two reconciles that each run to a default
    -- budget back to back hold the loop for two budgets' time, whatever
    -- they run (plain Lua too)
    contained({ collect = acceptance.collect }, 100000000)
    contained({ sort = acceptance.sort }, 100000000)
  end)

  it("end a reconcile looping on VM instructions that each cost O(n) with its budget's error, and nothing else", function()
    -- a concatenation, a compare or a conversion of long strings, a vararg
    -- of 100,000 values and a next() over a table emptied of 65,536 keys are
    -- one instruction each, costing milliseconds: 10,000 of them between
    -- count hooks ran for minutes (before, until the watchdog's interrupt,
    -- 5 s, or its exit). Now the watchdog's CPU meter charges the time no
    -- count saw, and the breach lands at the next instruction (sched_nudge),
    -- in a coroutine the reconcile resumed too. One attacker per process.
    local s8 = [[local s = ("x"):rep(1 << 23) local a, b = s, ("x"):rep(1 << 23) ]]
    for _, body in ipairs {
      s8 .. [[local f = coroutine.wrap(function() while true do local _ = s .. s .. s end end) f()]],
      s8 .. [[while true do local _ = a == b end]],
      s8 .. [[while true do local _ = a < b end]],
      [[local s = ("1"):rep(1 << 20) while true do local _ = s + 0 end]],
      [[local t = {} for i = 1, 100000 do t[i] = i end
        local function f(...) while true do local _ = select("#", ...) local _ = { ... } end end
        f(table.unpack(t))]],
      [[local t = {} for i = 1, 1 << 16 do t["k" .. i] = i end for k in pairs(t) do t[k] = nil end
        while true do local _ = next(t) end]],
    } do
      contained({ vm = body }, 100000000)
    end
  end)

  it("end a reconcile recursing to the edge of Lua's stack over and over with the default budget's error, and nothing else", function()
    -- At the edge, a collector's step is taken at each call's stack check
    -- and the finalizers it runs on the reconcile's thread have no room:
    -- each failed (and was lost), reallocating the 16 MB stack twice; and
    -- every nudge and re-arm of the count hook walked the 300,000 frames
    -- (lua_sethook). The loop stalled until the watchdog's interrupt.
    -- Here the steady controller may wait GAP + 1 s: one recursion to the
    -- edge costs Lua itself about 0.6 s (each of the stack's reallocations
    -- walks every frame: correctstack), most of it allowed by the CPU meter
    -- (200,000 CallInfo allocations, 1 us each), so one reconcile at the
    -- default budget holds the loop 0.4 to 1 s; a clean-clone CI saw 1.03 s.
    -- Stalled until the watchdog was 5 s.
    contained({ deep = [[local function f(n) if n == 0 then return 0 end return 1 + f(n - 1) end
      while true do pcall(f, 1e6) end]] }, 100000000, nil, GAP + 1)
  end)

  it("leave utf8.codes strict or lax as each call asked, whatever calls made before asked", function()
    -- (the charged iterator learns Lua's two iterators once; it took a
    -- one-argument call's iterator for the lax one, so a lax call later
    -- turned a strict iteration lax: a surrogate let through)
    local out = luaop.ok([[
      local s = "a\u{D800}b"
      local strict = utf8.codes(s)
      utf8.codes("x", true)
      print("strict", pcall(function() for _ in strict, s, 0 do end end))
      local again = utf8.codes(s)
      print("again", pcall(function() for _ in again, s, 0 do end end))
      print("lax", pcall(function() for _ in utf8.codes(s, true) do end end))
    ]], { offline = true })
    assert.matches("strict\tfalse\t[^\n]*invalid UTF%-8 code", out)
    assert.matches("again\tfalse\t[^\n]*invalid UTF%-8 code", out)
    assert.matches("lax\ttrue", out)
  end)

  it("end a reconcile looping on any other charged library call with its budget's error, and nothing else", function()
    for _, group in pairs(others) do
      contained(group, 2000000, { "--max-instructions", "2000000" })
    end
  end)
end)
