-- What a luaop script may not do: run commands, exit the process, use the
-- debug library, load C code or binary chunks. Each refusal names itself.
local luaop = require "support.luaop"

describe("the script sandbox", function()
  local kubeconfig

  setup(function()
    kubeconfig = luaop.offline_kubeconfig()
  end)

  teardown(function()
    os.remove(kubeconfig)
  end)

  local function run(source)
    return luaop.run(source, { kubeconfig = kubeconfig })
  end

  for call, name in pairs {
    ['os.execute("true")'] = "os.execute",
    ["os.exit(0)"] = "os.exit",
    ['io.popen("true")'] = "io.popen",
    ["string.dump(print)"] = "string.dump",
    ['package.loadlib("libc.so.6", "*")'] = "package.loadlib",
  } do
    it("refuses " .. name, function()
      local code, _, err = run(call .. "\nprint('not reached')")
      assert.are.equal(1, code)
      assert.matches(name:gsub("%p", "%%%0") .. " is not available to luaop scripts", err)
    end)
  end

  it("cannot read credentials through luaop.core", function()
    local code, out = run([[
      local core = require "luaop.core"
      print(core.kubeconfig, core.api ~= nil, core.json ~= nil)
    ]])
    assert.are.equal(0, code)
    assert.matches("^nil\ttrue\ttrue", out)
  end)

  it("never logs credentials written into the server URL", function()
    local path = luaop.offline_kubeconfig("http://alice:pw-s3cret@127.0.0.1:1")
    local code, out, err = luaop.run("return 0", { kubeconfig = path, flags = { "-v", "10" } })
    os.remove(path)
    assert.are.equal(0, code, err)
    assert.matches("using Kubernetes configuration", err)
    assert.is_nil((out .. err):find("pw-s3cret", 1, true))
  end)

  it("has no debug library", function()
    local code, out = run([[
      print(debug, pcall(require, "debug"))
    ]])
    assert.are.equal(0, code)
    assert.matches("^nil\tfalse\t", out)
  end)

  it("loads no binary chunks and no C modules", function()
    local code, out = run([[
      -- the header of a precompiled chunk
      local ok, err = pcall(load, "\27Lua\84\0", "x", "b")
      print("load b", ok, err)
      print("load bt", pcall(load, "return 1", "x", "bt"))
      local f, lerr = load("\27Lua\84\0")
      print("load binary text", f, lerr)
      print("require C", pcall(require, "lfs"))
    ]])
    assert.are.equal(0, code)
    assert.matches("load b\tfalse\t[^\n]*binary chunks are not available", out)
    assert.matches("load bt\tfalse", out)
    assert.matches("load binary text\tnil\t[^\n]*attempt to load a binary chunk", out)
    assert.matches("require C\tfalse\t[^\n]*module 'lfs' not found", out)
  end)

  it("still loads text, runs what it loaded, and reads files", function()
    local code, out = run([[
      print(load("return 1 + 1")())
      print(load("return ...", "chunk", "t", {})(7))
      local f = assert(io.open("/etc/hostname"))
      f:close()
      print(os.time() > 0, os.getenv("HOME") ~= nil)
    ]])
    assert.are.equal(0, code)
    assert.matches("^2\n7\ntrue\ttrue\n", out)
  end)
end)
