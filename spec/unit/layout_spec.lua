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

-- The Lua half: module name -> {required module = the line}, over every
-- file of lua/ (a require inside a function counts too); comments left out.
local function lua_modules()
  local graph = {}
  local find = assert(io.popen("find lua -name '*.lua' | sort"))
  for path in find:lines() do
    local mod = path:gsub("^lua/", ""):gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", ".") -- as hack/embed.lua
    graph[mod] = {}
    local n = 0
    for line in io.lines(path) do
      n = n + 1
      local code = line:gsub("%-%-.*$", "")
      for m in code:gmatch("require%s*%(?%s*[\"']([%w_.]+)[\"']") do
        graph[mod][m] = graph[mod][m] or ("%s:%d"):format(path, n)
      end
    end
  end
  find:close()
  return graph
end

-- The layers of docs/architecture.md's table: module -> {n, name}.
local function lua_layers()
  local layers = {}
  for line in io.lines("docs/architecture.md") do
    local n, name, mods = line:match("^| (%d+)%. ([^|]-) | (`luaop[^|]*) |$")
    if n then
      for m in mods:gmatch("`([%w_.]+)`") do
        assert(not layers[m], m .. " is in two layers of docs/architecture.md")
        layers[m] = { n = tonumber(n), name = name }
      end
    end
  end
  return layers
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

  it("has no Lua module that requires another around a circle, or one of a layer above its own", function()
    local graph, layers = lua_modules(), lua_layers()
    for mod, reqs in pairs(graph) do
      assert.is_not_nil(layers[mod], mod .. " is in no layer of docs/architecture.md's table")
      for m, where in pairs(reqs) do
        if m ~= "luaop.core" and m ~= "luaop.sandbox" then
          assert.is_not_nil(graph[m], where .. ": " .. m .. " is no module of lua/")
          assert.is_not_nil(layers[m], m .. " is in no layer of docs/architecture.md's table")
          assert.is_true(layers[m].n <= layers[mod].n, ("%s: %s (%s) requires %s, of a layer above (%s)")
            :format(where, mod, layers[mod].name, m, layers[m].name))
        end
      end
    end
    for m in pairs(layers) do assert.is_not_nil(graph[m], "docs/architecture.md's layers name " .. m .. ", which is gone") end
    local edges = {}
    for mod, reqs in pairs(graph) do
      edges[mod] = {}
      for m, where in pairs(reqs) do
        if graph[m] then edges[mod][m] = "a require at " .. where end
      end
    end
    local circle = cycle(edges)
    assert.is_nil(circle, circle)
  end)

  it("gives every Lua module a spec of its own, named after it or paired in docs/architecture.md", function()
    local pairs_of, parts_of = {}, {}
    for line in io.lines("docs/architecture.md") do
      local mods, spec = line:match("^| (`luaop[^|]-) | `(spec/unit/[%w_]+_spec%.lua)` |$")
      if mods then
        for m in mods:gmatch("`([%w_.*]+)`") do
          if m:sub(-2) == ".*" then parts_of[m:sub(1, -3)] = spec else pairs_of[m] = spec end
        end
      end
    end
    local graph = lua_modules()
    for m in pairs(pairs_of) do assert.is_not_nil(graph[m], "docs/architecture.md pairs " .. m .. ", which is gone") end
    for mod in pairs(graph) do
      local spec = pairs_of[mod]
      for whole, s in pairs(parts_of) do
        if mod:sub(1, #whole + 1) == whole .. "." then spec = spec or s end
      end
      spec = spec or ("spec/unit/%s_spec.lua"):format(mod == "luaop" and "luaop" or mod:gsub("^luaop%.", ""):gsub("%.", "_"))
      local f = io.open(spec)
      assert.is_not_nil(f, mod .. " has no spec: " .. spec .. " (or a pair in docs/architecture.md)")
      f:close()
    end
  end)

  it("keeps every Lua file at most 500 lines and every C file at most 800", function()
    local find = assert(io.popen("find lua src -name '*.lua' -o -name '*.c' | sort"))
    for path in find:lines() do
      local n = 0
      for _ in io.lines(path) do n = n + 1 end
      local limit = path:match("%.lua$") and 500 or 800
      assert.is_true(n <= limit, ("%s has %d lines (at most %d)"):format(path, n, limit))
    end
    find:close()
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

  it("names every file of src/ and lua/ in docs/architecture.md, and no file that is gone", function()
    local f = assert(io.open("docs/architecture.md"))
    local doc = f:read("a")
    f:close()
    local ls = assert(io.popen("ls src/*.c src/*.h; find lua -name '*.lua'"))
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
  it("names every folder of the tree in docs/architecture.md, and every file its table of changes names exists", function()
    local f = assert(io.open("docs/architecture.md"))
    local doc = f:read("a")
    f:close()
    local tree = assert(doc:match("## The rest.-```\n(.-)```"), "no tree under ## The rest")
    local named, top = {}, nil
    for line in tree:gmatch("[^\n]+") do
      local first = line:match("^([%w_.-]+)/")
      if first then top = first; named[first] = true end
      if line:match("^ ") and top then
        for d in line:sub(1, 19):gmatch("([%w_.-]+)/") do named[top .. "/" .. d] = true end
      end
    end
    -- (the tree as it is: a clean clone, or hack/mutants.sh's copy, which has no .git)
    local ls = assert(io.popen("find . -type f -not -path './build/*' -not -path './.*' | sed 's|^\\./||'"))
    for path in ls:lines() do
      local a, b = path:match("^([^./][^/]*)/([^/]+)/")
      local top_dir = path:match("^([^./][^/]*)/")
      if top_dir then assert.is_true(named[top_dir], top_dir .. "/ is not in docs/architecture.md's tree") end
      if a then assert.is_true(named[a .. "/" .. b], a .. "/" .. b .. "/ is not in docs/architecture.md's tree") end
    end
    ls:close()
    local changes = assert(doc:match("## Where a change goes(.-)\n## ") or doc:match("## Where a change goes(.*)$"))
    local rows = 0
    for row in changes:gmatch("\n| a new [^\n]+") do
      rows = rows + 1
      for path in row:gmatch("`([^`]+)`") do
        if path:find("/", 1, true) and not path:find("NAME", 1, true) and not path:find("*", 1, true) then
          local ok = os.execute("test -e " .. proc.quote(path))
          assert.is_true(ok == true, "docs/architecture.md's table of changes names " .. path .. ", which does not exist")
        end
      end
    end
    assert.is_true(rows >= 10, rows .. " kinds of change in docs/architecture.md's table")
  end)

  it("keeps the operators short: at.lua at most 55 code lines, useless-machine.lua at most 90, " ..
    "none over 100 columns, as the README counts them", function()
    local f = assert(io.open("README.md"))
    local readme = f:read("a")
    f:close()
    local limits = { ["at.lua"] = 55, ["useless-machine.lua"] = 90 }
    for _, name in ipairs { "at.lua", "useless-machine.lua", "secret-copy.lua", "pod-watcher.lua",
      "webhooks/at-webhooks.lua", "webhooks/machine-webhooks.lua" } do
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
