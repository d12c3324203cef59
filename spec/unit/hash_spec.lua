-- luaop.hash: the SHA-256 of a value's canonical JSON text, the same in
-- every process and version (its digests are pinned here), and a kit test
-- of the pattern it is for: a Reloader that stamps a ConfigMap's hash into
-- its Deployment's pod template, so that a change of the data rolls it.
local luaop = require "luaop"
local testing = require "luaop.testing"
local kit = require "support.kit"
local proc = require "support.proc"

describe("luaop.hash", function()
  it("is the SHA-256 of the value's canonical JSON text, as 64 hex digits, pinned across versions", function()
    -- (a change here changes every hash users stored: it must not happen)
    assert.are.equal("b4643e9de89170ba89413d223e33266979cbb8ce6fe29dec9b18fd4bd49949ad",
      luaop.hash { b = 1, a = { 1, 2.5, "x", true, luaop.null } })
    assert.are.equal("6cc43f858fbb763301637b5af970e2a46b46f461f27e5a0f41e009c59b827b25", luaop.hash "abc")
    assert.are.equal("5feceb66ffc86f38d952786c6d696c79c2dbc239dd4e91b46729d73a27fb57e9", luaop.hash(0))
    assert.are.equal("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", luaop.hash {})
    assert.are.equal("4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945", luaop.hash(luaop.array()))
    assert.are.equal("c23f34d13c23f86b49efd7e11384a35bcc9e9292a6f7ef8145e852a8737287d7",
      luaop.hash { data = { ["config.yaml"] = "x: 1\n", z = "é/<>" } })
  end)

  it("agrees with sha256sum of json.encode's text, for values of every JSON type and size", function()
    local long = ("0123456789abcdef"):rep(5000) -- many blocks
    for _, v in ipairs { { s = long }, { list = { 1, -2, 3.25, 1e300, "ü", false } }, "", 42, { [""] = { {} } } } do
      local text = luaop.json.encode(v)
      local path = os.tmpname()
      local f = assert(io.open(path, "wb"))
      f:write(text)
      f:close()
      local _, out = proc.sh("sha256sum < " .. proc.quote(path))
      os.remove(path)
      assert.are.equal(out:match("^(%x+)"), luaop.hash(v), text:sub(1, 60))
    end
  end)

  it("is the same for equal values however they were built: members in any order, 3.0 and 3, decoded or made", function()
    local a, b = {}, {}
    for i = 1, 50 do a["k" .. i] = i end
    for i = 50, 1, -1 do b["k" .. i] = i + 0.0 end
    assert.are.equal(luaop.hash(a), luaop.hash(b))
    assert.are.equal(luaop.hash(a), luaop.hash(luaop.json.decode(luaop.json.encode(b))))
    -- and different for different values: an array is not an object, 1 is not "1"
    assert.are_not.equal(luaop.hash {}, luaop.hash(luaop.array()))
    assert.are_not.equal(luaop.hash(1), luaop.hash "1")
    assert.are_not.equal(luaop.hash { a = 1 }, luaop.hash { a = 2 })
  end)

  it("raises at the caller's line for what JSON cannot hold: a function, a cycle, NaN, nothing", function()
    local line = debug.getinfo(1, "l").currentline
    local ok, err = pcall(function() return luaop.hash { f = print } end)
    assert.is_false(ok)
    assert.matches("hash_spec.lua:" .. line + 1 .. ": luaop.hash: cannot encode function as JSON", err)
    local t = {}
    t.t = t
    assert.matches("luaop.hash: .*cycle", select(2, pcall(function() return luaop.hash(t) end)))
    assert.matches("luaop.hash: .*NaN", select(2, pcall(function() return luaop.hash(0 / 0) end)))
    assert.matches("bad argument #1 to '[%w.]*hash'", select(2, pcall(function() return luaop.hash() end)))
  end)
end)

describe("luaop.hash in the kit", function()
  local t = kit.per_test(before_each, after_each)

  it("stamps a ConfigMap's hash into its Deployment's pod template, and a change of the data changes it", function()
    local script = t.dir .. "/reloader.lua"
    local f = assert(io.open(script, "w"))
    f:write(assert(io.open("spec/e2e/reloader.lua")):read("a"))
    f:close()
    t.env = testing.env { script = script }
    local env = t.env
    assert(env:create {
      apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "web", namespace = "default" },
      spec = { selector = { matchLabels = { app = "web" } },
        template = { metadata = { labels = { app = "web" } }, spec = { containers = { { name = "c", image = "nginx" } } } } },
    })
    assert(env:create(kit.cm("web", { ["config.yaml"] = "x: 1\n" })))
    local function stamp()
      return (env:get("Deployment", "web").spec.template.metadata.annotations or {})["example.com/config-hash"]
    end
    assert.are.equal(luaop.hash { ["config.yaml"] = "x: 1\n" }, stamp())
    local cm = env:get("ConfigMap", "web")
    cm.data["config.yaml"] = "x: 2\n"
    assert(env:update(cm))
    assert.are.equal(luaop.hash { ["config.yaml"] = "x: 2\n" }, stamp())
    -- the same data again: no write
    env:clear_actions()
    cm = env:get("ConfigMap", "web")
    cm.metadata.labels = { touched = "yes" }
    assert(env:update(cm))
    assert.are.same({}, env:actions { verb = "update", kind = "Deployment" })
  end)
end)
