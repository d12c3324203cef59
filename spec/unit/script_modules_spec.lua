-- Modules shared between scripts (luaop.script.modules): NAME.lib.lua
-- beside a script is its require "NAME", an instance per requiring script,
-- nested requires, cycles and unknown names refused at the caller's line,
-- never loaded as a script; a script reloaded when a module it uses
-- changes (and only such scripts), the running version kept when the
-- module breaks; `luaop --check` and the test kit load modules the same
-- way. No API server (offline: the informers keep failing to list, which
-- does not matter here); what is checked is what was loaded, from the log.
local luaop = require "support.luaop"
local kube = require "support.kube"
local volume = require "support.volume"
local proc = require "support.proc"
local kit = require "support.kit"
local testing = require "luaop.testing"

-- A script that requires util, bumps its counter, and logs what it saw.
local function script(name, version)
  return ([[
local luaop = require "luaop"
local util = require "util"
util.bump()
local again = require "util"
luaop.log:info("top level", { script = %q, version = %d, n = util.n, same = tostring(again == util),
  greeting = util.greet(%q), global = tostring(rawget(_G, "helper_global")) })
return luaop.controller {
  name = %q, resource = "v1/ConfigMap", namespace = "x",
  reconcile = function() end,
}
]]):format(name, version, name, name)
end

-- util: a counter, and a nested require of words; it logs its top level.
local function util(version)
  return ([[
local luaop = require "luaop"
local words = require "words"
rawset(_G, "helper_global", "util's") -- (a global of its own)
luaop.log:info("util top level", { version = %d })
local M = { n = 0 }
function M.bump() M.n = M.n + 1 end
function M.greet(who) return words.hello .. " " .. who .. " v%d" end
return M
]]):format(version, version)
end

local WORDS = 'return { hello = "hello" }\n'

-- A script that uses no module.
local PLAIN = [[
local luaop = require "luaop"
luaop.log:info("top level", { script = "plain" })
return luaop.controller { name = "plain", resource = "v1/ConfigMap", namespace = "x", reconcile = function() end }
]]

local function count(s, pattern)
  local n = 0
  for _ in s:gmatch(pattern) do n = n + 1 end
  return n
end

describe("modules shared between scripts", function()
  local function start(paths)
    local run = luaop.start(paths, { offline = true })
    finally(function()
      run.stop(143)
      run.cleanup()
    end)
    return run
  end

  local function logged(run, what, pattern, n)
    return kube.wait_for(what, 10, function()
      local err = run.stderr()
      return count(err, pattern) >= (n or 1) and err
    end)
  end

  it("give each script its own instance of NAME.lib.lua, cached, nested requires too, never run as a script", function()
    local v = volume.new {
      ["a.lua"] = script("a", 1), ["b.lua"] = script("b", 1),
      ["util.lib.lua"] = util(1), ["words.lib.lua"] = WORDS,
    }
    finally(function() v:remove() end)
    local run = start { v.dir }
    logged(run, "a's top level", '"script": "a", "version": 1')
    local err = logged(run, "b's top level", '"script": "b", "version": 1')
    -- each script bumped a counter of its own once, and got the same table again
    assert.matches('"greeting": "hello a v1", "n": 1, "same": "true", "script": "a"', err)
    assert.matches('"greeting": "hello b v1", "n": 1, "same": "true", "script": "b"', err)
    -- a module's globals are its own: the script does not see util's
    assert.matches('"global": "nil", "greeting": "hello a v1"', err)
    -- util ran once per script, not as a script of its own
    assert.are.equal(2, count(err, "util top level"))
    assert.is_nil(err:find("returns no controller definition", 1, true))
    assert.is_nil(err:find("lib.lua", 1, true), "no log line names a module file")
  end)

  it("let a single --script FILE require the modules beside it, and refuse to run a module as a script", function()
    local v = volume.new { ["a.lua"] = script("a", 1), ["util.lib.lua"] = util(1), ["words.lib.lua"] = WORDS }
    finally(function() v:remove() end)
    local run = start { v.dir .. "/a.lua" }
    logged(run, "a's top level", '"greeting": "hello a v1", "n": 1, "same": "true", "script": "a"')
    local code, _, err = luaop.run(nil, { offline = true, flags = { "--script", v.dir .. "/util.lib.lua" } })
    assert.are.equal(1, code)
    assert.matches("script [^\n]*/util%.lib%.lua is a module %(NAME%.lib%.lua%), which the scripts beside it require", err)
  end)

  it("raise at the requiring line for an unknown module, naming the modules there and the nearest, and for a cycle", function()
    local v = volume.new {
      ["a.lua"] = 'local luaop = require "luaop"\n\nlocal u = require "utill"\n',
      ["util.lib.lua"] = util(1), ["words.lib.lua"] = WORDS,
    }
    finally(function() v:remove() end)
    local code, _, err = luaop.run(nil, { offline = true, flags = { "--script", v.dir } })
    assert.are.equal(1, code)
    assert.matches("a%.lua:3: module utill is not available to luaop scripts: no file [^\n]*/utill%.lib%.lua beside "
      .. "the script %(did you mean util%?%); they may require luaop, cjson, [^\n]*, and the modules beside them: "
      .. "util, words", err)
    -- a name that cannot be a module's
    v:update { ["a.lua"] = 'local u = require "my-util"\n', ["util.lib.lua"] = util(1) }
    code, _, err = luaop.run(nil, { offline = true, flags = { "--script", v.dir } })
    assert.are.equal(1, code)
    assert.matches("a%.lua:1: module my%-util is not available to luaop scripts: a module's name is lowercase "
      .. "letters, digits and _", err)
    -- util requires words, which requires util: raised at words' line
    v:update { ["a.lua"] = script("a", 1), ["util.lib.lua"] = util(1),
      ["words.lib.lua"] = '-- words\nlocal util = require "util"\nreturn {}\n' }
    code, _, err = luaop.run(nil, { offline = true, flags = { "--script", v.dir } })
    assert.are.equal(1, code)
    assert.matches("a%.lua: [^\n]*/words%.lib%.lua:2: module util is required around a cycle: util requires words "
      .. "requires util", err)
  end)

  it("reload each script using a changed module, only those, and keep the running version when the module breaks", function()
    local files = { ["a.lua"] = script("a", 1), ["b.lua"] = script("b", 1), ["plain.lua"] = PLAIN,
      ["util.lib.lua"] = util(1), ["words.lib.lua"] = WORDS }
    local v = volume.new(files)
    finally(function() v:remove() end)
    local run = start { v.dir }
    logged(run, "a and b", '"script": "[ab]", "version": 1', 2)
    logged(run, "plain", '"script": "plain"')

    -- util changes (a ..data swap): a and b load again with it, plain does not
    files["util.lib.lua"] = util(2)
    v:update(files)
    local err = logged(run, "a and b reloaded", "script reloaded[^\n]*util%.lib%.lua", 2)
    assert.matches('"greeting": "hello a v2", "n": 1', err)
    assert.matches('"greeting": "hello b v2", "n": 1', err)
    assert.are.equal(1, count(err, '"script": "plain"'))
    assert.matches('script reloaded\t{"controllers": "a", "modules": "[^"]*/util%.lib%.lua"', err)

    -- a syntax error in util: both keep v2 serving, the log names util's file and line
    files["util.lib.lua"] = "local M = {}\nfunction M.bump(\nreturn M\n"
    v:update(files)
    err = logged(run, "the failed reloads", "script reload failed, the running version stays", 2)
    assert.matches('util%.lib%.lua:3: [^\n]*near \'return\'[^\n]*"script": "[^"]*/a%.lua"', err)
    assert.is_nil(err:find("stopping controller", 1, true), "a's and b's controllers kept running")
    -- a raise at util's top level: named the same way
    files["util.lib.lua"] = "local M = {}\n\nerror('util is broken')\n"
    v:update(files)
    err = logged(run, "the second failed reloads", "script reload failed, the running version stays", 4)
    assert.matches("util%.lib%.lua:3: util is broken", err)
    assert.is_nil(err:find("stopping controller", 1, true), "a's and b's controllers kept running")

    -- fixed: both load again; plain never did
    files["util.lib.lua"] = util(3)
    v:update(files)
    err = logged(run, "a and b on v3", '"greeting": "hello [ab] v3"', 2)
    assert.are.equal(1, count(err, '"script": "plain"'))
    -- a module only one script uses: only that one reloads
    files["a.lua"] = script("a", 4):gsub('local luaop = require "luaop"', 'local luaop = require "luaop"\nrequire "extra"')
    files["extra.lib.lua"] = "return 1\n"
    v:update(files)
    logged(run, "a v4", '"script": "a", "version": 4')
    files["extra.lib.lua"] = "return 2\n"
    v:update(files)
    err = logged(run, "a reloaded for extra", "script reloaded[^\n]*extra%.lib%.lua")
    assert.matches('script reloaded\t{"controllers": "a", "modules": "[^"]*/extra%.lib%.lua"', err)
    assert.is_nil(err:find('"controllers": "b", "modules": "[^"]*/extra'), "b does not use extra")
  end)

  it("load a script again once a module it missed appears", function()
    local files = { ["a.lua"] = script("a", 1), ["util.lib.lua"] = util(1), ["words.lib.lua"] = WORDS }
    local v = volume.new(files)
    finally(function() v:remove() end)
    local run = start { v.dir }
    logged(run, "a v1", '"script": "a", "version": 1')
    files["a.lua"] = script("a", 2):gsub('local luaop = require "luaop"', 'local luaop = require "luaop"\nrequire "extra"')
    v:update(files)
    logged(run, "a refused", "script reload failed[^\n]*module extra is not available")
    files["extra.lib.lua"] = "return 1\n"
    v:update(files)
    logged(run, "a v2", '"script": "a", "version": 2')
  end)
end)

describe("modules under luaop --check and the test kit", function()
  local t = kit.per_test(before_each, after_each)

  it("luaop --check loads a script's modules as luaop does, naming a module's file and line, and checks each module", function()
    proc.write(t.dir, "a.lua", script("a", 1))
    proc.write(t.dir, "util.lib.lua", util(1))
    proc.write(t.dir, "words.lib.lua", WORDS)
    local code, out, err = proc.run { luaop.bin, "--check", t.dir }
    assert.are.equal(0, code, out .. err)
    assert.matches("luaop %-%-check: 1 script, 2 modules, 0 findings", err)
    proc.write(t.dir, "words.lib.lua", "return {\n  hello = 'hello'\n  there = 1,\n}\n")
    code, out = proc.run { luaop.bin, "--check", t.dir }
    assert.are.equal(1, code)
    assert.matches("a%.lua: [^\n]*util%.lib%.lua:2: [^\n]*words%.lib%.lua:3: '}' expected", out)
    -- a module is checked as a script is, not run; a file require cannot name is a finding
    proc.write(t.dir, "words.lib.lua", WORDS)
    proc.write(t.dir, "extra.lib.lua", "local M = {}\nfunction M.f() return ctxx end\nreturn M\n")
    proc.write(t.dir, "My-Words.lib.lua", WORDS)
    code, out, err = proc.run { luaop.bin, "--check", t.dir }
    assert.are.equal(1, code)
    assert.matches("/My%-Words%.lib%.lua: a module's name is lowercase letters, digits and _ [^\n]*: no script can "
      .. "require it", out)
    assert.matches("/extra%.lib%.lua:2: unknown global ctxx", out)
    assert.matches("luaop %-%-check: 1 script, 4 modules, 2 findings", err)
  end)

  it("the kit loads a script's modules, an instance for each script it loads", function()
    proc.write(t.dir, "util.lib.lua", util(1))
    proc.write(t.dir, "words.lib.lua", WORDS)
    local a = proc.write(t.dir, "a.lua", script("a", 1))
    local b = proc.write(t.dir, "b.lua", script("b", 1))
    t.env = testing.env { scripts = { a, b } }
    local seen = {}
    for _, l in ipairs(t.env:logs { msg = "^top level$" }) do seen[l.fields.script] = l.fields end
    assert.are.equal("hello a v1", seen.a.greeting)
    assert.are.equal(1, seen.a.n)
    assert.are.equal(1, seen.b.n)
    assert.are.equal("true", seen.b.same)
    -- env:load again: a fresh instance, with the module's new text
    proc.write(t.dir, "util.lib.lua", util(2))
    t.env:load(a)
    local last
    for _, l in ipairs(t.env:logs { msg = "^top level$" }) do last = l.fields end
    assert.are.equal("hello a v2", last.greeting)
    assert.are.equal(1, last.n)
  end)

  it("a module may be required in a reconcile; code that must not wait raises until one loaded it", function()
    proc.write(t.dir, "late.lib.lua", 'return { name = function(o) return o.metadata.name .. "-late" end }\n')
    t.env = testing.env { script = proc.write(t.dir, "lazy.lua", [[
local luaop = require "luaop"
return luaop.controller {
  name = "lazy", resource = "v1/ConfigMap",
  watches = { { "v1/Secret", map = function(s) return { name = require("late").name(s) } end } },
  reconcile = function(ctx, req)
    ctx.log:info("lazy", { name = require("late").name({ metadata = { name = req.name } }) })
  end,
}
]]) }
    local function secret(name) return { apiVersion = "v1", kind = "Secret", metadata = { name = name, namespace = "default" } } end
    -- a watch map cannot read the file: it raises at its line, saying why
    t.env:create(secret("s"))
    local failed = t.env:logs { msg = "^event handler failed$" }
    assert.are.equal(1, #failed)
    assert.matches("lazy%.lua:4: module late is not loaded yet, and code that must not wait %(a handler, a watch "
      .. "map%) cannot read its file: require it at the script's top level", failed[1].fields.error)
    -- a reconcile can; then the map gets the same instance
    t.env:create(kit.cm("a"))
    t.env:create(secret("t"))
    local names = {}
    for _, l in ipairs(t.env:logs { msg = "^lazy$" }) do names[#names + 1] = l.fields.name end
    assert.are.same({ "a-late", "t-late-late" }, names)
    assert.are.equal(1, #t.env:logs { msg = "^event handler failed$" })
  end)

  it("luaop --test runs a spec of a script that requires a module", function()
    proc.write(t.dir, "util.lib.lua", util(1))
    proc.write(t.dir, "words.lib.lua", WORDS)
    proc.write(t.dir, "a.lua", script("a", 1))
    proc.write(t.dir, "a_spec.lua", [[
local testing = require "luaop.testing"
describe("a", function()
  it("greets through its module", function()
    local env = testing.env { script = "a.lua" }
    local l = env:logs { msg = "^top level$" }
    assert.are.equal("hello a v1", l[1].fields.greeting)
    env:stop()
  end)
end)
]])
    local code, out, err = proc.run { luaop.bin, "--test", t.dir }
    assert.are.equal(0, code, out .. err)
    assert.matches("ok 1 %- a greets through its module", out)
  end)
  it("testing.module gives a spec a module's functions, loaded as a script beside it gets it", function()
    proc.write(t.dir, "util.lib.lua", util(1))
    proc.write(t.dir, "words.lib.lua", WORDS)
    local u = testing.module(t.dir .. "/util.lib.lua")
    assert.are.equal("hello x v1", u.greet("x")) -- its own require of words found beside it
    u.bump()
    assert.are.equal(1, u.n)
    assert.are.equal(0, testing.module(t.dir .. "/util.lib.lua").n) -- each call a new instance
    assert.is_nil(rawget(_G, "helper_global")) -- its globals its own, not the spec's
    -- under luaop --test, the path beside the spec
    proc.write(t.dir, "u_spec.lua", [[
local testing = require "luaop.testing"
describe("util", function()
  local util = testing.module("util.lib.lua")
  it("greets", function() assert.are.equal("hello y v1", util.greet("y")) end)
end)
]])
    local code, out, err = proc.run { luaop.bin, "--test", t.dir .. "/u_spec.lua" }
    assert.are.equal(0, code, out .. err)
    assert.matches("ok 1 %- util greets", out)
    -- what is not a module's file, and a module that does not compile
    local ok, e = pcall(testing.module, t.dir .. "/a.lua")
    assert.is_false(ok)
    assert.matches("testing.module%(path%): .-/a%.lua is not a module's file: NAME%.lib%.lua", e)
    proc.write(t.dir, "bad.lib.lua", "return {} +\n")
    ok, e = pcall(testing.module, t.dir .. "/bad.lib.lua")
    assert.is_false(ok)
    assert.matches("^/[^\n]*/bad%.lib%.lua:%d+: unexpected symbol", e)
  end)
end)

describe("modules in the shipped manifests", function()
  it("the operators' ConfigMap generator lists every operators/*.lua, modules (NAME.lib.lua) among them", function()
    -- (kustomize takes no glob: a module left out of files: would be
    -- missing from the ConfigMap, and every script requiring it would fail)
    local listed, files = {}, {}
    local in_files = false
    for line in io.lines("operators/kustomization.yaml") do
      if line:match("^%s*files:%s*$") then in_files = true
      elseif in_files and line:match("^%s*%-%s*%S+%.lua%s*$") then listed[line:match("(%S+%.lua)")] = true
      elseif in_files and not line:match("^%s*#") then in_files = false end
    end
    local p = assert(io.popen("ls operators"))
    for name in p:lines() do
      if name:match("%.lua$") then files[#files + 1] = name end
    end
    p:close()
    assert.is_true(#files >= 4)
    for _, name in ipairs(files) do
      assert.is_true(listed[name] == true, name .. " is not under files: in operators/kustomization.yaml")
    end
  end)
end)
