-- luaop.retry: a controller's retry policy (the work queue's per-key
-- backoff and overall bucket, client-go's DefaultTypedControllerRateLimiter
-- unless the definition says otherwise) and terminal errors
-- (controller-runtime's reconcile.TerminalError: not retried). The queue
-- driven by hand on its own clock; the controller under the test kit.
local core = require "luaop.core"
local retry = require "luaop.retry"
local definition = require "luaop.definition"
local testing = require "luaop.testing"
local proc = require "support.proc"
local kit = require "support.kit"

local function def(fields)
  local d = { name = "c", resource = "v1/ConfigMap", reconcile = function() end }
  for k, v in pairs(fields or {}) do d[k] = v end
  return d
end

-- The waits of n rate-limited adds of key at time now.
local function waits(q, key, n, now)
  local out = {}
  for i = 1, n do out[i] = q:when(key, now) end
  return out
end

describe("luaop.retry's policy", function()
  it("gives the work queue client-go's defaults unless the definition says otherwise", function()
    assert.are.same({ base_delay = 0.005, max_delay = 1000, qps = 10, burst = 100 }, retry.options(def()))
    assert.are.same({ base_delay = 0.5, max_delay = 3, qps = 10, burst = 100, name = "x" },
      retry.options(def { retry = { base_delay = 0.5, max_delay = 3 } }, { name = "x" }))
    -- math.huge is rate.Inf: no overall bucket (the queue's qps 0)
    assert.are.equal(0, retry.options(def { retry = { qps = math.huge } }).qps)
  end)

  it("reaches the queue: the backoff from base_delay doubling to max_delay, the bucket's qps and burst", function()
    local q = core.workqueue.new(retry.options(def { retry = { base_delay = 0.5, max_delay = 3 } }), 0)
    assert.are.same({ 0.5, 1, 2, 3, 3 }, waits(q, "k", 5, 0))
    q:forget("k")
    assert.are.same({ 0.5 }, waits(q, "k", 1, 0))
    -- a bucket of 3 at 2 a second: three adds at once pass, the next wait
    -- for a token each (half a second apart)
    q = core.workqueue.new(retry.options(def { retry = { base_delay = 0.001, qps = 2, burst = 3 } }), 0)
    local got = {}
    for i = 1, 5 do got[i] = q:when("k" .. i, 0) end
    assert.are.same({ 0.001, 0.001, 0.001, 0.5, 1 }, got)
    -- client-go's defaults: the 101st add at once waits for the bucket
    q = core.workqueue.new(retry.options(def()), 0)
    for i = 1, 100 do assert.are.equal(0.005, q:when("d" .. i, 0)) end
    assert.are.equal(0.1, q:when("d101", 0))
    -- no bucket at all
    q = core.workqueue.new(retry.options(def { retry = { qps = math.huge } }), 0)
    for i = 1, 1000 do assert.are.equal(0.005, q:when("n" .. i, 0)) end
  end)

  it("re-tunes a queue in place: every key kept, the next backoff by the new policy", function()
    local q = core.workqueue.new(retry.options(def()), 0)
    q:add("ready")
    q:add_after("later", 100, 0)
    assert.are.same({ 0.005, 0.01 }, waits(q, "failing", 2, 0))
    q:tune(retry.options(def { retry = { base_delay = 1, max_delay = 2, qps = 1, burst = 1 } }), 0)
    local st = q:stats()
    assert.are.equal(1, st.depth)
    assert.are.equal(1, st.waiting)
    -- its failures kept: the third is 1 * 2^2, capped at 2
    assert.are.same({ 2 }, waits(q, "failing", 1, 0))
    -- the bucket holds at most the new burst: its one token taken by that
    -- add, the next ones wait a second each for theirs
    assert.are.equal(1, q:when("other", 0))
    assert.are.equal(2, q:when("third", 0))
    assert.are.equal("ready", q:get())
    q:tick(100)
    assert.are.equal("later", q:get())
    -- a bucket turned on starts full: a burst of 2, then a second a token
    q = core.workqueue.new(retry.options(def { retry = { base_delay = 0.001, qps = math.huge } }), 0)
    for i = 1, 10 do q:when("x" .. i, 0) end
    q:tune(retry.options(def { retry = { base_delay = 0.001, qps = 1, burst = 2 } }), 0)
    assert.are.same({ 0.001, 0.001, 1 }, { q:when("y1", 0), q:when("y2", 0), q:when("y3", 0) })
  end)

  it("refuses a malformed policy, naming the controller and the field", function()
    local cases = {
      { 5, "controller c: retry is a table { base_delay = seconds, max_delay = seconds, qps = per second, burst = n }, "
        .. "got the number 5" },
      { { base_delay = 0 }, "controller c: retry.base_delay must be a number of seconds > 0 (the first backoff), got "
        .. "the number 0" },
      { { base_delay = "5ms" }, 'retry.base_delay must be a number of seconds > 0 (the first backoff), got the string "5ms"' },
      { { base_delay = 0 / 0 }, "retry.base_delay must be a number of seconds > 0" },
      { { base_delay = 2, max_delay = 1 }, "retry.max_delay must be a number of seconds >= retry.base_delay (2), got the "
        .. "number 1" },
      { { max_delay = math.huge }, "retry.max_delay must be a number of seconds >= retry.base_delay (0.005)" },
      { { base_delay = 2000 }, "retry.base_delay the number 2000 is above max_delay's default (1000 s): give max_delay "
        .. "too" },
      { { qps = 0 }, "retry.qps must be a number > 0 (adds a second; math.huge: no overall limit), got the number 0" },
      { { qps = -1 }, "retry.qps must be a number > 0" },
      { { qps = 0 / 0 }, "retry.qps must be a number > 0" },
      { { burst = 0 }, "retry.burst must be an integer from 1 to 10^9, got the number 0" },
      { { burst = 1.5 }, "retry.burst must be an integer from 1 to 10^9, got the number 1.5" },
      { { burst = 2 ^ 40 }, "retry.burst must be an integer from 1 to 10^9" },
    }
    for _, c in ipairs(cases) do
      local ps = definition.problems(def { retry = c[1] })
      assert.are.equal(1, #ps, c[2])
      assert.are.equal("retry", ps[1].field)
      assert.is_nil(ps[1].unknown)
      assert.matches(c[2], ps[1].message, 1, true)
      local ok, err = pcall(definition.define, def { retry = c[1] })
      assert.is_false(ok)
      assert.matches(c[2], err, 1, true)
    end
    assert.are.same({}, definition.problems(def { retry = { base_delay = 1, max_delay = 1, qps = math.huge, burst = 1 } }))
    -- a misspelt key: the nearest, and (as an unknown field) logged, not refused
    local ps = definition.problems(def { retry = { max_dealy = 5 } })
    assert.are.equal(1, #ps)
    assert.is_true(ps[1].unknown)
    assert.are.equal("controller c: retry: unknown field max_dealy (did you mean max_delay?)", ps[1].message)
  end)
end)

describe("a retry policy's line", function()
  local t = kit.per_test(before_each, after_each)

  it("is the retry field's, in the kit as in --check", function()
    local path = proc.write(t.dir, "op.lua", [[
local luaop = require "luaop"
return luaop.controller {
  name = "pol",
  resource = "v1/ConfigMap",
  retry = { base_delay = 0.5, max_delay = 0.1 },
  reconcile = function(ctx, req)
  end,
}
]])
    local ok, err = pcall(testing.env, { script = path })
    assert.is_false(ok)
    local want = path .. ":5: controller pol: retry.max_delay must be a number of seconds >= retry.base_delay (0.5), "
      .. "got the number 0.1"
    assert.are.equal(want, tostring(err))
    local _, out = proc.run { "build/luaop", "--check", path }
    assert.matches(want:gsub("%p", "%%%0"), out)
  end)
end)

-- A controller whose reconcile does what its ConfigMap's data.do says, and
-- logs each reconcile with the kit's clock.
local SCRIPT = [[
local luaop = require "luaop"
return luaop.controller {
  name = "%s", resource = "v1/ConfigMap",
  retry = %s,
  reconcile = function(ctx, req)
    local cm = ctx:get("ConfigMap", req)
    if not cm then return end
    ctx.log:info("reconciled", { at = luaop.time.wall(), name = req.name })
    local what = cm.data and cm.data["do"]
    if what == "raise" then error("asked to fail") end
    if what == "terminal" then error(luaop.terminal("spec.schedule is not a time")) end
    if what == "return" then
      local err = luaop.terminal("spec.size is negative")
      return err
    end
    if what == "tail" then return luaop.terminal("made in a tail call") end
  end,
}
]]

-- The value of a series of /metrics's text (0 when absent).
local function metric(name, labels)
  local want = name .. "{" .. labels .. "} "
  for line in core.metrics.text():gmatch("[^\n]+") do
    if line:sub(1, #want) == want then return tonumber(line:sub(#want + 1)) end
  end
  return 0
end

describe("a controller's retries under the kit", function()
  local t = kit.per_test(before_each, after_each)

  local function cm(name, what) return kit.cm(name, { ["do"] = what }) end

  -- the kit's times of name's reconciles, from the first
  local function times(name)
    local out = {}
    for _, l in ipairs(t.env:logs { msg = "^reconciled$" }) do
      if l.fields.name == name then out[#out + 1] = l.fields.at end
    end
    for i = #out, 1, -1 do out[i] = out[i] - out[1] end
    return out
  end

  it("backs a failing reconcile off from the policy's base_delay, doubling to its max_delay, on the kit's clock",
    function()
    local path = proc.write(t.dir, "op.lua", SCRIPT:format("backoff", "{ base_delay = 1, max_delay = 4 }"))
    t.env = testing.env { script = path }
    t.env:create(cm("r", "raise"))
    t.env:advance(20)
    -- waits of 1, 2, 4, then 4 each (client-go's 5 ms would have tried some 20 times in 0.1 s)
    assert.are.same({ 0, 1, 3, 7, 11, 15, 19 }, times("r"))
  end)

  it("takes a changed policy on a reload, the failing key kept", function()
    local path = proc.write(t.dir, "op.lua", SCRIPT:format("reload", "{ base_delay = 1, max_delay = 1 }"))
    t.env = testing.env { script = path }
    t.env:create(cm("r", "raise"))
    t.env:advance(2.5)
    assert.are.same({ 0, 1, 2 }, times("r"))
    t.env:load(path, SCRIPT:format("reload", "{ base_delay = 10, max_delay = 10 }"))
    t.env:advance(30)
    -- still waiting for its retry at 3 (the reload's add through the
    -- queue keeps the earliest time), then backed off by the new policy:
    -- every 10 s
    assert.are.same({ 0, 1, 2, 3, 13, 23 }, times("r"))
  end)

  it("does not retry a terminal error, raised or returned: logged, a Warning Event, counted as both errors",
    function()
    local path = proc.write(t.dir, "op.lua", SCRIPT:format("term", "nil"))
    t.env = testing.env { script = path }
    local lit = path:gsub("%p", "%%%0")
    t.env:create(cm("raised", "terminal"))
    t.env:create(cm("returned", "return"))
    t.env:create(cm("tail", "tail"))
    t.env:advance(3600)
    assert.are.same({ 0 }, times("raised"))
    assert.are.same({ 0 }, times("returned"))
    assert.are.same({ 0 }, times("tail"))
    local errors = t.env:logs { level = "error", msg = "^Reconciler error$" }
    assert.are.equal(3, #errors)
    local by = {}
    for _, e in ipairs(errors) do by[e.fields.name] = e.fields.error end
    -- the line that raised it; the line that made it; in a tail call, the reconcile's
    assert.matches("^terminal error: " .. lit .. ":11: spec%.schedule is not a time$", by.raised)
    assert.matches("^terminal error: " .. lit .. ":13: spec%.size is negative$", by.returned)
    assert.matches("^terminal error: " .. lit .. ":5: %(controller term's reconcile%) made in a tail call$", by.tail)
    local ev = t.env:events(cm("raised"))
    assert.are.equal(1, #ev)
    assert.are.equal("Warning", ev[1].type)
    assert.are.equal("TerminalError", ev[1].reason)
    assert.matches("^terminal error: " .. lit .. ":11: spec%.schedule is not a time$", ev[1].note)
    assert.are.equal("TerminalError", t.env:events(cm("returned"))[1].reason)
    assert.are.equal(3, metric("controller_runtime_terminal_reconcile_errors_total", 'controller="term"'))
    assert.are.equal(3, metric("controller_runtime_reconcile_errors_total", 'controller="term"'))
    assert.are.equal(3, metric("controller_runtime_reconcile_total", 'controller="term",result="error"'))
    assert.are.equal(0, metric("controller_runtime_reconcile_panics_total", 'controller="term"'))
  end)

  it("reconciles an object that failed terminally again on its next event, as usual", function()
    local path = proc.write(t.dir, "op.lua", SCRIPT:format("again", "nil"))
    t.env = testing.env { script = path }
    t.env:create(cm("x", "terminal"))
    t.env:advance(60)
    assert.are.equal(1, #times("x"))
    t.env:patch("ConfigMap", "x", "default", { data = { ["do"] = "raise" } })
    t.env:advance(0.1) -- an error that is not terminal: retried again (5, 10, 20, 40 ms)
    assert.are.equal(6, #times("x"))
    t.env:patch("ConfigMap", "x", "default", { data = { ["do"] = "nothing" } })
    t.env:advance(60)
    assert.are.equal(5, metric("controller_runtime_reconcile_panics_total", 'controller="again"'))
    assert.are.equal(1, metric("controller_runtime_terminal_reconcile_errors_total", 'controller="again"'))
  end)

  it("forgets the key's backoff on a terminal error: a later failure backs off from base_delay again", function()
    local path = proc.write(t.dir, "op.lua", SCRIPT:format("forgets", "{ base_delay = 1, max_delay = 4 }"))
    t.env = testing.env { script = path }
    t.env:create(cm("f", "raise"))
    t.env:advance(10) -- 0, 1, 3, 7: four failures, the next retry due at 11
    t.env:patch("ConfigMap", "f", "default", { data = { ["do"] = "terminal" } })
    t.env:advance(10) -- terminal at 10; the retry already waiting still runs at 11 (as client-go's delayed adds do)
    t.env:patch("ConfigMap", "f", "default", { data = { ["do"] = "raise" } })
    t.env:advance(4)
    -- failing again at 20: 1 s, then 2 s (not the 4 s the fifth failure in a row would wait)
    assert.are.same({ 0, 1, 3, 7, 10, 11, 20, 21, 23 }, times("f"))
    assert.are.equal(2, metric("controller_runtime_terminal_reconcile_errors_total", 'controller="forgets"'))
  end)

  it("logs a terminal error a handler raises as any handler failure, saying it is terminal", function()
    local path = proc.write(t.dir, "h.lua", [[
local luaop = require "luaop"
return luaop.controller {
  name = "handled", resource = "v1/ConfigMap",
  on_add = function(ctx, obj)
    error(luaop.terminal("handler says no"))
  end,
}
]])
    t.env = testing.env { script = path }
    t.env:create(cm("h", "nothing"))
    t.env:advance(60)
    local errors = t.env:logs { level = "error" }
    assert.are.equal(1, #errors)
    assert.are.equal("event handler failed", errors[1].msg)
    assert.are.equal("on_add of handled (" .. path .. ":4): terminal error: handler says no", errors[1].fields.error)
  end)

  it("raises at the caller's line when terminal is given neither a string nor an API error", function()
    local line = debug.getinfo(1, "l").currentline
    local ok, err = pcall(retry.terminal, 5)
    assert.is_false(ok)
    assert.are.equal("terminal needs a message (a string or an API error), got the number 5", err)
    ok, err = pcall(function() return (retry.terminal({})) end)
    assert.is_false(ok)
    assert.matches("^spec/unit/retry_spec%.lua:" .. (line + 4) .. ": terminal needs a message", err)
    -- an API error: its text; the value's metatable is no script's to change
    local e = retry.terminal(require("luaop.client.errors").error(404, { kind = "Status", message = "gone" }))
    assert.are.equal("terminal error: NotFound (404): gone", tostring(e))
    assert.is_false(getmetatable(e))
    assert.has_error(function() setmetatable(e, nil) end)
  end)
end)
