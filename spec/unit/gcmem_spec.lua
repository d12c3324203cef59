-- Memory the Lua collector frees goes back to the system (src/gcmem.c): a
-- process's RSS follows its live heap down, instead of staying at its
-- peak as glibc's heap otherwise does.
local proc = require "support.proc"
local luaop = require "support.luaop"

describe("the Lua collector", function()
  it("gives the memory of a collected cycle's garbage back to the system (RSS falls with the heap)", function()
    local dir = proc.tempdir()
    finally(function() os.execute("rm -rf '" .. dir .. "'") end)
    local program = proc.write(dir, "garbage.lua", [[
local function rss()
  local f = assert(io.open("/proc/self/status"))
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)"))
end
collectgarbage("collect")
local before = rss()
-- 60 MB or so of small tables and strings, like a LIST's decoded pages
local keep, t = {}, {}
for i = 1, 300000 do t[i] = { name = "object-" .. i, n = i } end
for i = 1, 3000 do keep[i] = { name = "kept-" .. i } end
local peak = rss()
t = nil
collectgarbage("collect")
print(before, peak, rss(), #keep)
]])
    local code, out, err = proc.run { "build/luaop", "--kubeconfig", luaop.offline(), "--program", program }
    assert.are.equal(0, code, err)
    local before, peak, after = out:match("^(%d+)\t(%d+)\t(%d+)\t3000")
    before, peak, after = tonumber(before), tonumber(peak), tonumber(after)
    assert(before, out)
    assert.is_true(peak - before > 20000, ("the garbage took only %d KiB"):format(peak - before))
    -- without the trim at the end of the cycle RSS stays at the peak
    assert.is_true(after - before < (peak - before) / 4,
      ("RSS %d KiB before, %d at the peak, %d after the collection"):format(before, peak, after))
  end)
end)
