-- luaop.backoff: client-go's exponential backoff manager, as its reflector
-- uses it (800 ms doubling to 30 s, jitter 1.0, reset after 2 quiet minutes).
local backoff = require "luaop.backoff"

describe("luaop.backoff", function()
  it("has client-go's reflector's values: 0.8 s, at most 30 s, reset after 120 s", function()
    assert.are.same({ 0.8, 30, 120 }, { backoff.MIN_BACKOFF, backoff.MAX_BACKOFF, backoff.BACKOFF_RESET })
  end)

  it("doubles each wait from the least to the most, each jittered up to twice itself", function()
    local b, now = backoff.new(), 0
    local base = 0.8
    for _ = 1, 12 do
      local w = b:next(now)
      assert.is_true(w >= base and w < 2 * base, ("%g not in [%g, %g)"):format(w, base, 2 * base))
      now = now + w
      base = math.min(base * 2, 30)
    end
  end)

  it("starts again from the least once more than the reset period passed since the last wait began", function()
    local b = backoff.new { MIN_BACKOFF = 1, MAX_BACKOFF = 100, BACKOFF_RESET = 10 }
    for t = 1, 4 do b:next(t) end -- 1, 2, 4, 8 (jittered), a second apart
    assert.is_true(b:next(5) >= 16)
    assert.is_true(b:next(15) >= 32) -- exactly the period since the last began: not yet
    assert.is_true(b:next(25.001) < 2) -- more than it: from the least
  end)

  it("reads its parameters at each wait", function()
    local p = { MIN_BACKOFF = 1, MAX_BACKOFF = 4, BACKOFF_RESET = 60 }
    local b = backoff.new(p)
    b:next(0)
    p.MAX_BACKOFF = 1.5
    local w = b:next(1)
    assert.is_true(w >= 1.5 and w < 3, tostring(w))
  end)
end)
