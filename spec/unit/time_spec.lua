-- luaop.time: Kubernetes timestamps (RFC 3339) to epoch seconds and back.
local time = require("luaop").time

describe("luaop.time", function()
  it("parses UTC and offset timestamps, with fractions", function()
    assert.are.equal(0, time.parse("1970-01-01T00:00:00Z"))
    assert.are.equal(1795341600, time.parse("2026-11-22T10:00:00Z"))
    assert.are.equal(1709247599, time.parse("2024-02-29T23:59:59+01:00"))
    assert.are.equal(1555063920.5, time.parse("2019-04-12T10:12:00.5Z"))
  end)

  it("refuses what is not a timestamp", function()
    assert.is_nil(time.parse("2019-04-12T10:12Z"))
    assert.is_nil(time.parse("yesterday"))
    assert.is_nil(time.parse(nil))
  end)

  it("formats as Kubernetes writes times, and round-trips", function()
    assert.are.equal("2026-11-22T10:00:00Z", time.format(1795341600))
    assert.are.equal("2024-02-29T22:59:59Z", time.format(time.parse("2024-02-29T23:59:59+01:00")))
    local now = time.now()
    assert.is_true(math.abs(now - os.time()) <= 1)
    assert.are.equal(math.floor(now), time.parse(time.format(now)))
  end)
end)
