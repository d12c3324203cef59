-- The source's shape (docs/architecture.md): which file uses which, read
-- from the object files themselves (nm), so a circle between files, or a
-- second event loop, fails here whoever adds it.
local proc = require "support.proc"

-- name -> set of the names whose global symbols it takes, over build/obj/*.o
local function uses()
  local defined, undefined, names = {}, {}, {}
  local ls = assert(io.popen("ls build/obj/*.o"))
  for path in ls:lines() do
    local name = path:match("([^/]+)%.o$")
    local src = io.open("src/" .. name .. ".c")
    if src then src:close() else goto next end -- (an object left from a file that is gone)
    names[#names + 1] = name
    undefined[name] = {}
    local nm = assert(io.popen("nm " .. proc.quote(path)))
    for line in nm:lines() do
      local kind, sym = line:match("^%x*%s+(%a)%s+(%S+)$")
      if kind == "U" then
        undefined[name][#undefined[name] + 1] = sym
      elseif kind and kind:match("[TDBR]") then
        defined[sym] = name
      end
    end
    nm:close()
    ::next::
  end
  ls:close()
  assert(#names > 10, "no object files: build first")
  local graph = {}
  for _, name in ipairs(names) do
    graph[name] = {}
    for _, sym in ipairs(undefined[name]) do
      local owner = defined[sym]
      if owner and owner ~= name then graph[name][owner] = sym end
    end
  end
  return graph
end

-- A cycle in graph as "a -> b -> a (symbols)", or nil.
local function cycle(graph)
  local state, stack = {}, {}
  local function visit(n)
    state[n] = "open"
    stack[#stack + 1] = n
    for m, sym in pairs(graph[n]) do
      if state[m] == "open" then
        local path = {}
        for i = #stack, 1, -1 do
          table.insert(path, 1, stack[i])
          if stack[i] == m then break end
        end
        path[#path + 1] = m
        return table.concat(path, " -> ") .. " (" .. n .. " takes " .. sym .. ")"
      elseif not state[m] then
        local found = visit(m)
        if found then return found end
      end
    end
    stack[#stack] = nil
    state[n] = "done"
  end
  local names = {}
  for n in pairs(graph) do names[#names + 1] = n end
  table.sort(names)
  for _, n in ipairs(names) do
    if not state[n] then
      local found = visit(n)
      if found then return found end
    end
  end
end

describe("the source's layout", function()
  it("has no two files in src/ that use each other, directly or around a circle", function()
    local graph = uses()
    assert.is_nil(cycle(graph))
    -- the task concept is a room of its own: everything that waits uses it, it uses none of them
    for _, waits in ipairs { "lbind_api", "lbind_watch", "lbind_fs" } do
      assert.is_not_nil(graph[waits].lbind_task, waits .. " does not use lbind_task")
      assert.is_nil(graph.lbind_task[waits], "lbind_task uses " .. waits)
    end
  end)

  it("finds a circle where there is one (the check itself)", function()
    assert.matches("a %-> b %-> a", cycle { a = { b = "f" }, b = { a = "g" } })
    assert.matches("b %-> c %-> d %-> b", cycle { a = { b = "f" }, b = { c = "g" }, c = { d = "h" }, d = { b = "i" } })
    assert.is_nil(cycle { a = { b = "f", c = "g" }, b = { c = "h" }, c = {} })
  end)

  it("makes every event loop a runtime's own: nothing uses libuv's default loop", function()
    local graph = uses()
    local p = assert(io.popen("nm -u build/obj/*.o | grep -c uv_default_loop"))
    local n = tonumber(p:read("a"))
    p:close()
    assert.are.equal(0, n)
    assert.is_not_nil(graph.main.runtime, "main does not make a runtime")
  end)

  it("names every file of src/ and lua/luaop/ in docs/architecture.md, and no file that is gone", function()
    local f = assert(io.open("docs/architecture.md"))
    local doc = f:read("a")
    f:close()
    local ls = assert(io.popen("ls src/*.c src/*.h lua/luaop/*.lua"))
    local files = {}
    for path in ls:lines() do
      files[path] = true
      assert.is_truthy(doc:find("`" .. path .. "`", 1, true), path .. " is not in docs/architecture.md")
    end
    ls:close()
    for path in doc:gmatch("`([%w_/]+%.[chlua]+)`") do
      if path:match("^src/") or path:match("^lua/luaop/") then
        assert.is_true(files[path] == true, "docs/architecture.md names " .. path .. ", which is gone")
      end
    end
  end)
  it("keeps the operators short: at.lua at most 50 code lines, useless-machine.lua at most 90, " ..
    "none over 100 columns, as the README counts them", function()
    local f = assert(io.open("README.md"))
    local readme = f:read("a")
    f:close()
    local limits = { ["at.lua"] = 50, ["useless-machine.lua"] = 90 }
    for _, name in ipairs { "at.lua", "useless-machine.lua", "secret-copy.lua", "pod-watcher.lua" } do
      local code = 0
      for line in io.lines("operators/" .. name) do
        assert.is_true(#line <= 100, ("%s: a line of %d columns"):format(name, #line))
        if not line:match("^%s*$") and not line:match("^%s*%-%-") then code = code + 1 end
      end
      if limits[name] then assert.is_true(code <= limits[name], ("%s: %d code lines"):format(name, code)) end
      assert.is_truthy(readme:find("| `" .. name .. "` | " .. code .. " |", 1, true),
        ("README.md does not say %s has %d code lines"):format(name, code))
    end
  end)
end)
