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

  it("checks every field's range, leap years and offsets included, and says which is wrong", function()
    for text, want in pairs {
      ["2026-19-01T00:00:00Z"] = "month 19 is out of range",
      ["2026-00-01T00:00:00Z"] = "month 0 is out of range",
      ["2026-01-39T00:00:00Z"] = "day 39 is out of range",
      ["2026-01-00T00:00:00Z"] = "day 0 is out of range",
      ["2026-04-31T00:00:00Z"] = "day 31 is out of range",
      ["2026-02-29T00:00:00Z"] = "day 29 is out of range", -- not a leap year
      ["2100-02-29T00:00:00Z"] = "day 29 is out of range", -- nor is 2100
      ["2026-01-01T29:00:00Z"] = "hour 29 is out of range",
      ["2026-01-01T00:60:00Z"] = "minute 60 is out of range",
      ["2026-01-01T00:00:60Z"] = "second 60 is out of range",
      ["2026-01-01T00:00:00+99:99"] = "zone hour 99 is out of range",
      ["2026-01-01T00:00:00+01:75"] = "zone minute 75 is out of range",
      ["2026-01-01T00:00:00+0100"] = "the zone must be Z or +hh:mm",
      ["2026-01-01T00:00:00.Z"] = "a fraction needs digits",
      ["2026-1-01T00:00:00Z"] = "is not an RFC 3339 time",
    } do
      local t, err = time.parse(text)
      assert.is_nil(t, text)
      assert.is_truthy(err and err:find(want, 1, true), ("%s: %s"):format(text, tostring(err)))
    end
    assert.are.equal(951782400, time.parse("2000-02-29T00:00:00Z")) -- 2000 is a leap year
    assert.are.equal(1709164800, time.parse("2024-02-29T00:00:00Z"))
    assert.are.equal(1767225599, time.parse("2025-12-31T23:59:59Z"))
    assert.are.equal(1767225600 - 86340, time.parse("2026-01-01T00:00:00+23:59"))
  end)

  it("writes four-digit years, and refuses to write a time RFC 3339 cannot (found by fuzzing)", function()
    local t = assert(time.parse("0226-11-22T10:00:00Z"))
    assert.are.equal("0226-11-22T10:00:00Z", time.format(t))
    assert.are.equal("0000-01-01T00:00:00Z", time.format(time.parse("0000-01-01T00:00:00Z")))
    assert.are.equal("1969-12-31T23:59:59Z", time.format(-1))
    -- an offset that carries a time out of those years (found by fuzzing)
    for _, text in ipairs { "0000-01-01T00:00:00+00:01", "9999-12-31T23:59:59-00:01" } do
      local parsed, why = time.parse(text)
      assert.is_nil(parsed, text)
      assert.matches("outside the years 0000 to 9999 in UTC", why)
    end
    local text, err = time.format(253402300800) -- 10000-01-01
    assert.is_nil(text)
    assert.matches("outside the years 0000 to 9999", err)
  end)

  it("keeps the second a fraction belongs to, even where a double cannot hold the fraction (found by fuzzing)", function()
    local t = time.parse("9999-12-31T23:59:59.999999999Z")
    assert.are.equal(253402300799, math.floor(t))
    assert.are.equal("9999-12-31T23:59:59Z", time.format(t))
    assert.are.equal(1555063920.5, time.parse("2019-04-12T10:12:00.5Z"))
  end)

  it("formats as Kubernetes writes times, and round-trips", function()
    assert.are.equal("2026-11-22T10:00:00Z", time.format(1795341600))
    assert.are.equal("2024-02-29T22:59:59Z", time.format(time.parse("2024-02-29T23:59:59+01:00")))
    -- the wall clock, between two readings of the C library's (whole
    -- seconds, from a clock a few ms coarse: a second either side),
    -- however long the process is held between the calls
    local before = os.time()
    local now = time.wall()
    local after = os.time()
    assert.is_true(now >= before - 1 and now < after + 2, ("%d - 1 <= %.6f < %d + 2"):format(before, now, after))
    assert.are.equal(math.floor(now), time.parse(time.format(now)))
  end)
end)
