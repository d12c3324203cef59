-- luaop.core.fs: kind, list and read answer from the thread pool, the
-- calling task waiting meanwhile.
local luaop = require "support.luaop"

describe("luaop.core.fs", function()
  local dir

  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "/sub' && printf 'a\\0b' > '" .. dir .. "/f.lua' && ln -s f.lua '" .. dir .. "/link'"))
  end)

  teardown(function()
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("tell kinds, list a directory and read a file, waiting as tasks do", function()
    local out = luaop.ok(([[
      local fs = require("luaop.core").fs
      local dir = %q
      print("kinds", fs.kind(dir), fs.kind(dir .. "/sub"), fs.kind(dir .. "/f.lua"), fs.kind(dir .. "/link"))
      print("missing", fs.kind(dir .. "/none"))
      local names = assert(fs.list(dir))
      table.sort(names)
      print("names", table.concat(names, " "))
      print("list missing", fs.list(dir .. "/none"))
      local text = assert(fs.read(dir .. "/link"))
      print("read", #text, text == "a\0b")
      print("read a directory", fs.read(dir))
      -- they wait, so not from a coroutine of the script's own
      print("coroutine", pcall(coroutine.wrap(function() return fs.kind(dir) end)))
    ]]):format(dir), { offline = true })
    assert.matches("kinds\tdirectory\tdirectory\tfile\tfile", out)
    assert.matches("missing\tnil\t[^\n]*/none: no such file or directory", out)
    assert.matches("names\tf.lua link sub\n", out)
    assert.matches("list missing\tnil\t[^\n]*no such file or directory", out)
    assert.matches("read\t3\ttrue", out)
    assert.matches("read a directory\tnil\t[^\n]*on a directory", out)
    assert.matches("coroutine\tfalse\t[^\n]*fs.kind can only be called from a luaop task", out)
  end)
end)
