-- luaop.core.workqueue: client-go's work queue guarantees, case by case
-- (after util/workqueue's queue_test.go, delaying_queue_test.go and
-- default_rate_limiters_test.go). Time is passed in by hand.
local workqueue = require("luaop.core").workqueue

local function drain(q)
  local keys = {}
  while true do
    local k = q:get()
    if not k then return keys end
    keys[#keys + 1] = k
  end
end

local function near(a, b)
  return math.abs(a - b) < 1e-9
end

describe("luaop.core.workqueue", function()
  describe("the queue", function()
    it("hands keys out in the order they came", function()
      local q = workqueue.new()
      for _, k in ipairs { "a", "b", "c" } do q:add(k) end
      assert.are.same({ "a", "b", "c" }, drain(q))
      assert.is_nil(q:get())
    end)

    it("collapses adds of a key that is already waiting", function()
      local q = workqueue.new()
      for _ = 1, 5 do q:add("a") end
      q:add("b")
      q:add("a")
      assert.are.equal(2, q:stats().depth)
      assert.are.same({ "a", "b" }, drain(q))
    end)

    it("never hands out a key that is being processed; an add meanwhile requeues it when done", function()
      local q = workqueue.new()
      q:add("a")
      assert.are.equal("a", q:get())
      q:add("a")
      q:add("a")
      assert.is_nil(q:get(), "still processing")
      assert.are.equal(1, q:stats().processing)
      q:done("a")
      assert.are.equal("a", q:get())
      assert.is_nil(q:get(), "the two adds collapsed")
      q:done("a")
      assert.is_nil(q:get())
      assert.are.same({ depth = 0, waiting = 0, processing = 0, adds = 2, retries = 0, chunks = 1 }, q:stats())
    end)

    it("does not requeue a key on done when nothing added it meanwhile", function()
      local q = workqueue.new()
      q:add("a")
      q:done(q:get())
      assert.is_nil(q:get())
      q:done("a") -- a second done is harmless
      q:done("never-added")
      assert.is_nil(q:get())
    end)

    it("takes nothing new after shutdown, and drains what was queued", function()
      local q = workqueue.new()
      q:add("a")
      q:add("b")
      assert.are.equal("a", q:get())
      q:add("a")
      q:shutdown()
      assert.is_true(q:shutting_down())
      q:add("c")
      q:add_after("d", 0.001, 0)
      q:add_rate_limited("e", 0)
      q:done("a") -- "a" was added while processing, before the shutdown
      assert.are.same({ "b", "a" }, drain(q))
      q:tick(100)
      assert.is_nil(q:get())
    end)

    it("handles many keys", function()
      local q = workqueue.new()
      for i = 1, 5000 do q:add("k" .. i) end
      for i = 1, 5000 do q:add("k" .. i) end
      local keys = drain(q)
      assert.are.equal(5000, #keys)
      assert.are.equal("k1", keys[1])
      assert.are.equal("k5000", keys[5000])
      for _, k in ipairs(keys) do q:done(k) end
      assert.are.equal(0, q:stats().processing)
    end)
  end)

  describe("memory", function()
    -- (a sync queues every object's key at once: their items, freed as
    -- the keys are done, must leave no holes between what the process
    -- keeps, docs/benchmarks.md)
    it("keeps a burst of keys in chunks of its own and unmaps them once the keys are done, but for one, "
      .. "while a key that waits out a delay meanwhile pins none of them", function()
      local q = workqueue.new()
      for i = 1, 20000 do q:add(("namespace-%d/name-%d"):format(i % 7, i)) end
      local burst = q:stats().chunks
      assert.is_true(burst >= 20, "20,000 keys in " .. burst .. " chunks")
      local n = 0
      while true do
        local k = q:get()
        if not k then break end
        n = n + 1
        -- every 1000th key waits out a delay: moved among the long-lived
        if n % 1000 == 0 then q:add_after(k, 60, 0) end
        q:done(k)
      end
      assert.are.equal(20000, n)
      assert.are.equal(20, q:stats().waiting)
      assert.are.equal(2, q:stats().chunks, "the emptied current chunk and the delayed keys' chunk")
      q:tick(61)
      assert.are.equal(20, #drain(q))
      for i = 1, 20 do q:done(("namespace-%d/name-%d"):format((i * 1000) % 7, i * 1000)) end
      assert.are.same({ depth = 0, waiting = 0, processing = 0 },
        { depth = q:stats().depth, waiting = q:stats().waiting, processing = q:stats().processing })
      assert.are.equal(2, q:stats().chunks)
    end)
  end)

  describe("delayed adds", function()
    it("queue a key when its time comes, and say when that is", function()
      local q = workqueue.new()
      q:add_after("a", 1.0, 100)
      q:add_after("b", 0.5, 100)
      assert.is_nil(q:get())
      assert.are.equal(100.5, q:next_ready())
      q:tick(100.4)
      assert.is_nil(q:get())
      q:tick(100.5)
      assert.are.equal("b", q:get())
      assert.are.equal(101, q:next_ready())
      q:tick(101)
      assert.are.equal("a", q:get())
      assert.is_nil(q:next_ready())
    end)

    it("keep the earliest time asked for a key", function()
      local q = workqueue.new()
      q:add_after("a", 5, 0)
      q:add_after("a", 1, 0)
      q:add_after("a", 3, 0)
      assert.are.equal(1, q:next_ready())
      assert.are.equal(1, q:stats().waiting)
      q:tick(1)
      assert.are.same({ "a" }, drain(q))
      assert.is_nil(q:next_ready())
    end)

    it("add at once when the delay is not positive", function()
      local q = workqueue.new()
      q:add_after("a", 0, 0)
      q:add_after("b", -1, 0)
      assert.are.same({ "a", "b" }, drain(q))
    end)

    it("order many delayed keys by time", function()
      local q = workqueue.new()
      for i = 200, 1, -1 do q:add_after("k" .. i, i, 0) end
      q:tick(1000)
      local keys = drain(q)
      assert.are.equal(200, #keys)
      for i = 1, 200 do assert.are.equal("k" .. i, keys[i]) end
    end)
  end)

  describe("rate limiting", function()
    it("backs off per key exponentially and forgets on success", function()
      local q = workqueue.new { base_delay = 0.001, max_delay = 1, qps = 0 }
      for _, want in ipairs { 0.001, 0.002, 0.004, 0.008, 0.016 } do
        assert.is_true(near(want, q:when("one", 0)))
      end
      assert.is_true(near(0.001, q:when("two", 0)))
      assert.is_true(near(0.002, q:when("two", 0)))
      assert.are.equal(5, q:requeues("one"))
      assert.are.equal(2, q:requeues("two"))
      q:forget("one")
      assert.are.equal(0, q:requeues("one"))
      assert.is_true(near(0.001, q:when("one", 0)))
    end)

    it("caps the backoff without overflowing", function()
      local q = workqueue.new { base_delay = 0.001, max_delay = 1000, qps = 0 }
      for _ = 1, 5 do q:when("one", 0) end
      assert.is_true(near(0.032, q:when("one", 0)))
      for _ = 1, 1000 do q:when("over", 0) end
      assert.are.equal(1000, q:when("over", 0))
    end)

    it("puts an overall token bucket over the per-key backoff", function()
      local q = workqueue.new({ base_delay = 0, max_delay = 0, qps = 10, burst = 100 }, 0)
      for i = 1, 100 do assert.are.equal(0, q:when("k" .. i, 0)) end
      assert.is_true(near(0.1, q:when("k101", 0)))
      assert.is_true(near(0.2, q:when("k102", 0)))
      -- the bucket refills at 10 per second
      assert.is_true(near(0.1, q:when("k103", 0.2)))
      -- up to its burst, however long it was idle: 100 keys pass, not more
      for i = 1, 100 do assert.are.equal(0, q:when("idle" .. i, 1000)) end
      assert.is_true(near(0.1, q:when("idle101", 1000)))
    end)

    it("uses client-go's defaults: 5 ms doubling to 1000 s, 10/s with a burst of 100", function()
      local q = workqueue.new()
      assert.is_true(near(0.005, q:when("a", 0)))
      assert.is_true(near(0.010, q:when("a", 0)))
      for _ = 1, 40 do q:when("a", 0) end
      assert.are.equal(1000, q:when("a", 0))
      -- the bucket: 100 keys at once pass on their own backoff, the 101st
      -- waits for a token (0.1 s at 10/s), the 102nd for two
      local d = workqueue.new()
      for i = 1, 100 do assert.is_true(near(0.005, d:when("k" .. i, 0)), "k" .. i) end
      assert.is_true(near(0.1, d:when("k101", 0)))
      assert.is_true(near(0.2, d:when("k102", 0)))
    end)

    it("requeues a failed key after its backoff, counting retries", function()
      local q = workqueue.new { base_delay = 0.5, max_delay = 10, qps = 0 }
      q:add("a")
      assert.are.equal("a", q:get())
      q:add_rate_limited("a", 10) -- failed: retry in 0.5 s
      q:done("a")
      assert.is_nil(q:get())
      assert.are.equal(10.5, q:next_ready())
      q:tick(10.5)
      assert.are.equal("a", q:get())
      q:add_rate_limited("a", 11) -- failed again: 1 s
      q:done("a")
      assert.are.equal(12, q:next_ready())
      assert.are.equal(2, q:stats().retries)
      assert.are.equal(2, q:requeues("a"))
      q:tick(12)
      assert.are.equal("a", q:get())
      q:forget("a") -- succeeded
      q:done("a")
      assert.are.equal(0, q:requeues("a"))
    end)
  end)

  it("raises on misuse", function()
    assert.has_error(function() workqueue.new { base_delay = 2, max_delay = 1 } end)
    local q = workqueue.new()
    assert.has_error(function() q:add() end)
    assert.has_error(function() q:add_after("a", "soon") end)
  end)

  -- take(): the loop's own timer, in C, hands keys to waiting tasks
  describe("take", function()
    local support = require "support.luaop"
    it("hands a delayed key over when it comes due, never early, woken by the loop's timer and not by polling", function()
      local code, out, err = support.run([[
        local core = require "luaop.core"
        local luaop = require "luaop"
        local q = core.workqueue.new()
        local taken = {}
        local worker = luaop.spawn(function()
          while true do
            local k = q:take()
            if not k then return end
            taken[#taken + 1] = { key = k, at = core.task.now(), iterations = core.task.iterations() }
            q:done(k)
          end
        end)
        local t0, i0 = core.task.now(), core.task.iterations()
        -- added out of order; an earlier one added while a later one is waiting
        q:add_after("late", 0.6, t0)
        q:add_after("soon", 0.2, t0)
        luaop.sleep(0.05)
        q:add_after("sooner", 0.05, t0 + 0.05)
        luaop.sleep(0.8)
        for _, t in ipairs(taken) do
          print(t.key, ("%.4f"):format(t.at - t0), t.iterations - i0)
        end
        print("iterations", core.task.iterations() - i0)
        q:shutdown()
        print("worker", worker:wait())
      ]], { offline = true })
      assert.are.equal(0, code, err)
      local due = { sooner = 0.1, soon = 0.2, late = 0.6 }
      -- lateness: 50 ms, 200 ms for the ASan build (whose loop and timers
      -- run several times slower); polling shows in the wake-ups below
      local slack = support.bin:find("asan", 1, true) and 0.2 or 0.05
      local order, woke = {}, {}
      for key, at, iterations in out:gmatch("(%a+)\t([%d.]+)\t(%d+)\n") do
        order[#order + 1] = key
        woke[key] = tonumber(iterations)
        at = tonumber(at)
        assert.is_true(at >= due[key], ("%s taken %.4f s after the start, due at %.1f"):format(key, at, due[key]))
        assert.is_true(at < due[key] + slack, ("%s taken %.4f s late"):format(key, at - due[key]))
      end
      assert.are.same({ "sooner", "soon", "late" }, order)
      -- from "soon" taken to "late" taken, 0.4 s with nothing else to do, the
      -- loop woke up for the late key's timer and its hand-over only; a
      -- ticker polling every 0.25 s (or less) would have woken it more
      assert.is_true(woke.late - woke.soon <= 2, ("the loop woke up %d times"):format(woke.late - woke.soon))
      assert.matches("worker\ttrue", out)
    end)

    it("returns nil to every waiting task on wake and on shutdown, and serves keys first", function()
      local code, out, err = support.run([[
        local core = require "luaop.core"
        local luaop = require "luaop"
        local q = core.workqueue.new()
        local function worker(name)
          return luaop.spawn(function()
            local got = {}
            while true do
              local k = q:take()
              got[#got + 1] = tostring(k)
              if k then q:done(k) elseif q:shutting_down() then return table.concat(got, ",") end
            end
          end)
        end
        local a, b = worker("a"), worker("b")
        luaop.sleep(0.01)
        q:wake()
        luaop.sleep(0.01)
        q:add("k1")
        q:add("k2")
        q:shutdown()
        local _, ra = a:wait()
        local _, rb = b:wait()
        print("got", ra, rb)
      ]], { offline = true })
      assert.are.equal(0, code, err)
      local ra, rb = out:match("got\t(%S+)\t(%S+)")
      -- each woken once with nil, the two keys shared out, then nil at shutdown
      local all = ra .. "," .. rb
      assert.are.equal(2, select(2, all:gsub("k%d", "")), all)
      assert.matches("^nil,", ra)
      assert.matches("^nil,", rb)
      assert.matches(",nil$", ra)
      assert.matches(",nil$", rb)
    end)
  end)
end)
