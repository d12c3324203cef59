-- The spec harness itself (spec/support): it must not hang on a process that
-- will not end, nor pass a run that a sanitizer reported on.
local proc = require "support.proc"
local luaop = require "support.luaop"
local system = require "system"

local function alive(pid) return os.execute("kill -0 " .. pid .. " 2>/dev/null") == true end

describe("the spec harness", function()
  it("kills a command past its deadline and fails with the command and its last lines", function()
    local t0 = system.gettime()
    local ok, err = pcall(proc.run, { "sh", "-c", "echo still going; exec sleep 30" }, nil, { deadline = 1 })
    assert.is_false(ok)
    assert.matches("'sh' '%-c' 'echo still going; exec sleep 30' did not exit within 1 s %(killed%)", err)
    assert.matches("still going", err)
    assert.is_true(system.gettime() - t0 < 10)
  end)

  it("fails a stop() whose process ignores SIGTERM, within its deadline, and kills it", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    local fake = dir .. "/luaop"
    local f = assert(io.open(fake, "w"))
    -- a luaop that ignores SIGTERM
    f:write("#!/bin/sh\ntrap '' TERM\necho started >&2\nwhile :; do sleep 0.1; done\n")
    f:close()
    assert(os.execute("chmod +x " .. fake))
    finally(function() os.execute("rm -rf " .. dir) end)
    local run = luaop.start("return 0", { bin = fake, kubeconfig = "/dev/null", stop_deadline = 1 })
    -- its trap is set once it says so
    local until_ = system.gettime() + 10
    while not run.stderr():find("started", 1, true) and system.gettime() < until_ do system.sleep(0.02) end
    assert.matches("started", run.stderr())
    local t0 = system.gettime()
    local ok, err = pcall(run.stop)
    assert.is_false(ok)
    assert.matches("did not exit within 1 s of SIGTERM %(killed%)", err)
    assert.matches("started", err)
    assert.is_true(system.gettime() - t0 < 10)
    local deadline = system.gettime() + 5
    while alive(run.pid()) and system.gettime() < deadline do system.sleep(0.05) end
    assert.is_false(alive(run.pid()), "the process outlived its stop()")
    run.cleanup()
  end)

  it("fails a stop() with the wrong exit status, naming both", function()
    local run = luaop.start("return 0", { bin = "/bin/false", kubeconfig = "/dev/null" })
    local deadline = system.gettime() + 10
    while not run.exited() and system.gettime() < deadline do system.sleep(0.05) end
    local ok, err = pcall(run.stop)
    assert.is_false(ok)
    assert.matches("luaop exited 1, expected 0", err)
    run.cleanup()
  end)

  it("fails a run whose stderr holds a sanitizer report, whatever its exit status", function()
    for _, report in ipairs {
      "==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6020",
      "==1==ERROR: LeakSanitizer: detected memory leaks",
      "src/json.c:120:7: runtime error: signed integer overflow",
    } do
      local ok, err = pcall(proc.run, { "sh", "-c", "echo '" .. report .. "' >&2; exit 0" })
      assert.is_false(ok, report)
      assert.matches("sanitizer report: " .. report:gsub("%p", "%%%0"), err)
    end
    -- and a clean run passes
    assert.are.equal(0, (proc.run { "sh", "-c", "echo 'a runtime error in a message' >&2" }))
  end)

  it("gives every child leak detection and sanitizer exit codes of its own", function()
    -- whatever the spec runner itself was given (the ASan pass: detect_leaks=0)
    local _, out = proc.run { "sh", "-c", "echo $ASAN_OPTIONS; echo $UBSAN_OPTIONS" }
    assert.matches("detect_leaks=1", out)
    assert.matches("exitcode=86", out)
    assert.matches("exitcode=87", out)
  end)

  it("runs every function a test gives finally(), the last first, and fails the test if one raises", function()
    local base = os.tmpname() -- (made, empty: the spec's name is base_spec.lua)
    os.remove(base)
    local path = base .. "_spec.lua"
    local f = assert(io.open(path, "w"))
    f:write([[
describe("finally", function()
  local ran = {}
  it("stacks", function()
    finally(function() ran[#ran + 1] = "a" end)
    finally(function() ran[#ran + 1] = "b" end)
    finally(function() ran[#ran + 1] = "c" end)
  end)
  it("ran all, last first", function() assert.are.same({ "c", "b", "a" }, ran) end)
  it("a failing cleanup", function()
    finally(function() ran[#ran + 1] = "d" end)
    finally(function() error("cleanup broke") end)
  end)
  it("the others still ran", function() assert.are.same({ "c", "b", "a", "d" }, ran) end)
end)
]])
    f:close()
    -- busted as make test runs it (its .busted, so this repository's helper)
    local code, out = proc.run({ "sh", "-c", "lua5.4 \"$(command -v busted)\" -o plainTerminal " .. proc.quote(path) })
    os.remove(path)
    assert.are.equal(1, code, out)
    assert.matches("3 successes / 0 failures / 1 error", out, 1, true)
    assert.matches("cleanup broke", out, 1, true)
  end)
end)
