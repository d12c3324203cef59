-- luaop.client.view: what a script gets for a client. Methods over the
-- client, never the client, its class or what it holds; the client's
-- namespace and server readable as strings; what a script sets stays in its
-- view. (The quota of open watches: owners_spec; views across scripts:
-- reach_spec.)
local view = require "luaop.client.view"

describe("luaop.client.view", function()
  local c = { namespace = "team-a", server = "https://example.test", secret = { token = "t" } }

  it("offers the client's verbs and watch as methods, its namespace and server, and nothing else of it", function()
    local v = view.view(c)
    for _, m in ipairs { "get", "list", "create", "update", "update_status", "patch", "apply", "delete", "watch" } do
      assert.are.equal("function", type(v[m]), m)
    end
    assert.are.equal("team-a", v.namespace)
    assert.are.equal("https://example.test", v.server)
    assert.is_nil(v.secret)
    assert.is_nil(v.__index)
    assert.is_false(getmetatable(v))
    assert.are.equal(view.view(c).get, v.get) -- one method table for every view
  end)

  it("keeps what a script sets on its view in that view", function()
    local a, b = view.view(c), view.view(c)
    a.namespace = "mine"
    assert.are.equal("mine", a.namespace)
    assert.are.equal("team-a", b.namespace)
    assert.are.equal("team-a", c.namespace)
  end)

  it("finds its client by its own self: a method called on anything else raises", function()
    local v = view.view(c)
    local ok, err = pcall(v.get, {}, "ConfigMap", "x")
    assert.is_false(ok)
    assert.matches("call it as client:method%(%.%.%.%)", err)
    ok, err = pcall(v.get)
    assert.is_false(ok)
    assert.matches("call it as client:method", err)
  end)

  it("refuses a watch past the script's quota before asking the server", function()
    local quota = { open = 2, max = 2 }
    local ok, err = pcall(view.view(c, quota).watch, view.view(c, quota), "ConfigMap")
    assert.is_false(ok)
    assert.matches("2 watches of this script are open, the most it may have", err)
  end)
end)
