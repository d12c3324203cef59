-- luaop.informer against a fake API server (spec/support/fake_apiserver.py),
-- for what a real one cannot be made to show on demand: the watch's query
-- and bookmarks.
local luaop = require "support.luaop"
local fake = require "support.fake"

-- luaop running an informer of the fake server's ConfigMaps in default
-- whose label selector is `selector` (the fake's switch: "deep",
-- "malformed"), started and synced as `inf`, then `body`, which may call
-- cached(name): whether `name` is in the cache within 30 s. Returns the
-- server (stopped by the spec's finally), then luaop.run's code, out, err.
local function run_informer(selector, body)
  local server = fake.start()
  finally(server.stop)
  return server, luaop.run(([[
      local luaop = require "luaop"
      local core = require "luaop.core"
      local inf = require("luaop.informer").new("ConfigMap", { namespace = "default", label_selector = %q })
      inf:start()
      inf:wait_synced()
      local function cached(name)
        local deadline = luaop.time.monotonic() + 30
        while not inf:get("default", name) and luaop.time.monotonic() < deadline do luaop.sleep(0.01) end
        return inf:get("default", name) ~= nil
      end
]]):format(selector) .. body, { kubeconfig = server.kubeconfig, flags = { "--qps", "0" } })
end

describe("luaop.informer", function()
  it("asks each watch for bookmarks and a random timeout of 5 to 10 minutes, resuming from the last resourceVersion, "
    .. "a bookmark's included", function()
    local server = fake.start()
    finally(server.stop)
    local code, out, err = luaop.run([[
      local luaop = require "luaop"
      local inf = require("luaop.informer").new("ConfigMap", { namespace = "default" })
      inf:start()
      inf:wait_synced()
      -- the fake ends each watch after an ADDED (resourceVersion 40 + W) and a
      -- BOOKMARK (50 + W): wait until the third watch's bookmark is in
      local deadline = luaop.time.monotonic() + 20
      while tonumber(inf.rv) < 53 and luaop.time.monotonic() < deadline do luaop.sleep(0.01) end
      print("rv", tonumber(inf.rv) >= 53, inf:get("default", "new") ~= nil, #inf:list())
      inf:stop()
    ]], { kubeconfig = server.kubeconfig, flags = { "--qps", "0" } })
    assert.are.equal(0, code, err)
    assert.matches("rv\ttrue\ttrue\t6", out) -- five listed, one added
    local watches, first = {}, nil
    for _, line in ipairs(server.requests()) do
      first = first or line:match("^GET /api/v1/namespaces/default/configmaps%?(%S*)")
      local q = line:match("^GET /api/v1/namespaces/default/configmaps%?(%S*watch=true%S*)")
      if q and not q:find("sendInitialEvents", 1, true) then
        local t = {}
        for k, v in q:gmatch("([^&=]+)=([^&]*)") do t[k] = v end
        watches[#watches + 1] = t
      end
    end
    -- first the streaming list, which this server refuses (422), then a
    -- paged LIST and watches
    assert.matches("resourceVersionMatch=NotOlderThan", first)
    assert.matches("sendInitialEvents=true", first)
    assert.matches("does not stream lists %(sendInitialEvents%): listing in pages instead", err)
    assert.is_true(#watches >= 3, out)
    local timeouts = {}
    for i = 1, 3 do
      assert.are.equal("true", watches[i].allowWatchBookmarks)
      local t = tonumber(watches[i].timeoutSeconds)
      assert.is_true(t >= 300 and t <= 600, watches[i].timeoutSeconds)
      timeouts[t] = true
    end
    -- the first from the LIST's resourceVersion, then from each bookmark's
    -- (the ADDED before it had 41 and 42)
    assert.are.same({ "7", "51", "52" },
      { watches[1].resourceVersion, watches[2].resourceVersion, watches[3].resourceVersion })
    -- random: three equal timeouts would come once in 90,000 runs
    assert.is_not_nil(next(timeouts, next(timeouts)), "three watches asked for the same timeout")
  end)

  it("leaves out an object that does not decode, in a LIST and in a watch, logging its name, counting it and "
    .. "recording a Warning Event, and syncs the rest", function()
    local server, code, out, err = run_informer("deep", [[
      print("listed", inf:get("default", "cm-a") ~= nil, inf:get("default", "cm-deep") ~= nil, inf:get("default", "cm-b") ~= nil)
      print("watched", cached("watch-after"), inf:get("default", "watch-deep") ~= nil)
      inf:stop()
      print("counted", core.counters().undecodable_objects >= 2)
      require("luaop.events").flush(5) -- the Warnings' writes
    ]])
    assert.are.equal(0, code, err)
    assert.matches("listed\ttrue\tfalse\ttrue", out)
    assert.matches("watched\ttrue\tfalse", out)
    assert.matches("counted\ttrue", out)
    assert.matches('skipping an object that cannot be decoded\t{"error": "nesting deeper than 10240 at byte %d+", ' ..
      '"kind": "ConfigMap", "name": "cm%-deep", "namespace": "default"}', err)
    -- a Warning Event for each (the fake server takes any POST)
    local posts = 0
    for _, line in ipairs(server.requests()) do
      if line:match("^POST /apis/events%.k8s%.io/v1/namespaces/default/events ") then posts = posts + 1 end
    end
    assert.is_true(posts >= 2, table.concat(server.requests(), "\n"))
    assert.matches('skipping an object that cannot be decoded\t{[^\n]*"name": "watch%-deep"', err)
    assert.is_nil(err:find("list/watch failed", 1, true), err)
  end)
  it("ends a watch at a malformed event (no object, no metadata or name, an unknown type), logs and counts it, "
    .. "and lists again, never taking what followed it, and goes on watching", function()
    -- before, an event whose object was null ended the informer's task:
    -- nothing logged, no watch again, /readyz still 200
    local server, code, out, err = run_informer("malformed", [[
      print("watched", cached("watch-after"), inf:get("default", "never-seen") ~= nil,
        inf:get("default", "surprise") ~= nil, inf:get("default", "cm-0") ~= nil)
      print("counted", (core.metrics.text():match('luaop_watch_malformed_events_total{resource="v1/ConfigMap"} (%d+)')))
      inf:stop()
    ]])
    assert.are.equal(0, code, err)
    assert.matches("watched\ttrue\tfalse\tfalse\ttrue", out)
    assert.matches("counted\t5", out)
    for _, why in ipairs { "ADDED, whose object is null", "MODIFIED, whose object is a string",
                           'an unknown type, \\"SURPRISE\\"', "ADDED, whose object has no metadata",
                           "DELETED, whose object has no name" } do
      assert.matches("list/watch failed, retrying[^\n]*malformed watch event: " .. why:gsub("%p", "%%%0"), err)
    end
    -- a LIST after each: the first sync's and five more (two pages each)
    local lists = 0
    for _, line in ipairs(server.requests()) do
      if line:match("^GET /api/v1/namespaces/default/configmaps%?[^ ]*limit=") and not line:find("watch=", 1, true)
        and not line:find("continue=", 1, true) then lists = lists + 1 end
    end
    assert.are.equal(6, lists, table.concat(server.requests(), "\n"))
  end)

  it("does not start watches as fast as a server that ends each at once answers (no client rate limit to slow it)",
    function()
    local server = fake.start()
    finally(server.stop)
    local code, _, err = luaop.run([[
      local luaop = require "luaop"
      local inf = require("luaop.informer").new("ConfigMap", { namespace = "default" })
      inf:start()
      inf:wait_synced()
      luaop.sleep(3)
      inf:stop()
    ]], { kubeconfig = server.kubeconfig })
    assert.are.equal(0, code, err)
    local watches = 0
    for _, line in ipairs(server.requests()) do
      if line:match("^GET /api/v1/namespaces/default/configmaps%?%S*watch=true") then watches = watches + 1 end
    end
    -- each ends at once: about one a second (0.4 to 1.2 s apart), not hundreds
    assert.is_true(watches >= 2 and watches <= 10, ("%d watches in 3 s"):format(watches))
  end)
end)
