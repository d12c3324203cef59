-- math.random in scripts: a generator per script (luaop.random), with Lua
-- 5.4's interface, so no script's seed decides what another draws.
local sandbox = require "luaop.script.sandbox"

describe("math.random in a script", function()
  it("draws from a generator of the script's own: another script's seed and draws change nothing of it", function()
    local a, b, ref = sandbox.env().math, sandbox.env().math, sandbox.env().math
    a.randomseed(7)
    ref.randomseed(7)
    local got = { a.random(1e9) }
    b.randomseed(7) -- the same seed elsewhere, and draws there
    for _ = 1, 100 do b.random() end
    got[2] = a.random(1e9)
    assert.are.same({ ref.random(1e9), ref.random(1e9) }, got)
    -- and Lua's own generator is not theirs
    assert.are_not.equal(math.random, a.random)
    assert.are_not.equal(a.random, b.random)
  end)

  it("keeps Lua 5.4's interface: ranges, random(0), seeds returned, and its errors", function()
    local m = sandbox.env().math
    -- Lua 5.4's generator: the same draws as Lua's own for the same seed
    math.randomseed(42)
    m.randomseed(42)
    for _ = 1, 10 do assert.are.equal(math.random(0), m.random(0)) end
    for _ = 1, 10 do assert.are.equal(math.random(), m.random()) end
    math.randomseed() -- Lua's own seeded at random again
    local n1, n2 = m.randomseed(42)
    assert.are.same({ 42, 0 }, { n1, n2 })
    local seen = {}
    for _ = 1, 2000 do
      local f = m.random()
      assert.is_true(math.type(f) == "float" and f >= 0 and f < 1)
      local d = m.random(6)
      assert.is_true(math.type(d) == "integer" and d >= 1 and d <= 6)
      seen[d] = true
      local r = m.random(-3, 3)
      assert.is_true(r >= -3 and r <= 3)
      assert.are.equal("integer", math.type(m.random(0)))
      local big = m.random(math.mininteger, math.maxinteger)
      assert.are.equal("integer", math.type(big))
    end
    assert.are.same({ true, true, true, true, true, true }, seen)
    assert.are.equal(5, m.random(5, 5))
    assert.has_error(function() m.random(3, 1) end, "bad argument #1 to 'random' (interval is empty)")
    assert.has_error(function() m.random(1.5) end, "bad argument #1 to 'random' (number has no integer representation)")
    assert.has_error(function() m.random(1, 2, 3) end, "wrong number of arguments")
    assert.has_error(function() m.random("x") end, "bad argument #1 to 'random' (number expected, got string)")
    -- the same seed, the same numbers; no seed, others
    m.randomseed(9)
    local first = { m.random(0), m.random(0) }
    m.randomseed(9)
    assert.are.same(first, { m.random(0), m.random(0) })
    m.randomseed()
    assert.are_not.same(first, { m.random(0), m.random(0) })
  end)
end)
