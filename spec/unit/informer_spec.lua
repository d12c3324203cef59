-- luaop.informer against a fake API server (spec/support/fake_apiserver.py),
-- for what a real one cannot be made to show on demand: the watch's query
-- and bookmarks.
local luaop = require "support.luaop"
local fake = require "support.fake"

-- luaop running an informer of the fake server's ConfigMaps in default
-- whose label selector is `selector` (the fake's scenario: "deep",
-- "malformed", "gone", ...), started and synced as `inf`, then `body`, which may call
-- cached(name): whether `name` is in the cache within 30 s. Returns the
-- server (stopped by the spec's finally), then luaop.run's code, out, err.
-- before: code run before the informer is made (`informer` is the module);
-- opts: more of informer.new's options, as Lua fields ("trim = {...}").
local function run_informer(selector, body, before, opts)
  local server = fake.start()
  finally(server.stop)
  return server, luaop.run(luaop.STATUS_MIB .. ([[
      local luaop = require "luaop"
      local core = require "luaop.core"
      local informer = require "luaop.informer"
      %s
      local inf = informer.new("ConfigMap", { namespace = "default", label_selector = %q, %s })
      inf:start()
      inf:wait_synced()
      local function cached(name)
        local deadline = luaop.time.monotonic() + 30
        while not inf:get("default", name) and luaop.time.monotonic() < deadline do luaop.sleep(0.01) end
        return inf:get("default", name) ~= nil
      end
]]):format(before or "", selector, opts or "") .. body, { kubeconfig = server.kubeconfig, flags = { "--qps", "0" } })
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
  it("syncs from LIST pages as from a stream: each item's metadata decoded for the sync, its text kept whole, "
    .. "with the apiVersion and kind a list leaves out", function()
    local _, code, out, err = run_informer("", [[
      local text = inf.store["default/cm-3"]
      print("text", text:sub(1, 38), text:find("managedFields", 1, true) == nil)
      local o = inf:get("default", "cm-3")
      local listed = 0 -- (the watch after the sync adds "new")
      for _, x in ipairs(inf:list()) do listed = listed + (x.metadata.name:match("^cm%-%d$") and 1 or 0) end
      print("got", o.apiVersion, o.kind, o.metadata.uid, o.data.n, listed)
      inf:stop()
    ]], "informer.STREAM = false")
    assert.are.equal(0, code, err)
    assert.matches('text	{"apiVersion":"v1","kind":"ConfigMap",	true', out, 1, true)
    assert.matches("got	v1	ConfigMap	uid%-cm%-3	3	5", out)
  end)

  it("gives no memory back at a collection's end while it syncs, streamed or by LIST pages (each minor "
    .. "collection would walk the allocator's heap), and does again once synced", function()
    for _, stream in ipairs { "true", "false" } do
      local _, code, out, err = run_informer("", [[
        -- (the fake server may end the watch after the sync: a sync again)
        local alternate = #holds % 2 == 0
        for i, h in ipairs(holds) do alternate = alternate and h == (i % 2 == 1 and "true" or "false") end
        print("held", holds[1], holds[2], alternate)
        inf:stop()
      ]], [[
        informer.STREAM = ]] .. stream .. [[

        holds = {}
        local hold = core.gcmem_hold
        core.gcmem_hold = function(on)
          holds[#holds + 1] = tostring(on)
          return hold(on)
        end
      ]])
      assert.are.equal(0, code, err)
      assert.matches("held\ttrue\tfalse\ttrue\n", out)
    end
  end)

  it("syncs from one LIST read as it arrives (LIST_STREAM): no page asked for, each item's metadata decoded for "
    .. "the sync, its text kept whole with the apiVersion and kind a list leaves out, watched from its "
    .. "resourceVersion", function()
    local server, code, out, err = run_informer("", [[
      local text = inf.store["default/cm-3"]
      print("text", text:sub(1, 38), text:find("managedFields", 1, true) == nil)
      local o = inf:get("default", "cm-3")
      local listed = 0
      for _, x in ipairs(inf:list()) do listed = listed + (x.metadata.name:match("^cm%-%d$") and 1 or 0) end
      print("got", o.apiVersion, o.kind, o.metadata.uid, o.data.n, o.metadata.annotations.note, listed)
      print("new", cached("new"))
      inf:stop()
    ]], "informer.STREAM = false informer.LIST_STREAM = true")
    assert.are.equal(0, code, err)
    assert.matches('text	{"apiVersion":"v1","kind":"ConfigMap",	true', out, 1, true)
    assert.matches('got	v1	ConfigMap	uid-cm-3	3	"continue": "3"}]	5', out, 1, true)
    assert.matches("new\ttrue", out)
    local lists, watch = 0, nil
    for _, line in ipairs(server.requests()) do
      if line:find("GET /api/v1/namespaces/default/configmaps", 1, true) then
        if line:find("watch=true", 1, true) then watch = watch or line else lists = lists + 1 end
        assert.is_nil(line:find("limit=", 1, true), line)
      end
    end
    assert.are.equal(1, lists)
    assert.matches("resourceVersion=7", watch)
  end)

  it("lists again, after its backoff, when a LIST read as it arrives answers a list no API server sends (no "
    .. "metadata, no items array, an item whose namespace is not a string, a Status with 200, a continue token), "
    .. "never as an empty list", function()
    local _, code, out, err = run_informer("badlist", [[
      print("listed", inf:get("default", "cm-0") ~= nil, inf:get("default", "cm-4") ~= nil,
        inf:get("default", "never-listed") ~= nil)
      local labels = 'resource="ConfigMap",namespace="default",reason='
      print("counted", sample('luaop_watch_failures_total{' .. labels .. '"MalformedList"}'),
        sample('luaop_watch_failures_total{' .. labels .. '"MalformedEvent"}'))
      inf:stop()
    ]], "informer.MIN_BACKOFF = 0.05 informer.STREAM = false informer.LIST_STREAM = true")
    assert.are.equal(0, code, err)
    assert.matches("listed\ttrue\ttrue\tfalse", out)
    assert.matches("counted\t6\t1\n", out)
    for _, why in ipairs { "a LIST answered a list with no metadata", "malformed list: an answer with no items array",
                           "a continue token, though no page was asked for" } do
      assert.matches("list/watch failed, listing again[^\n]*" .. why:gsub("%p", "%%%0"), err)
    end
  end)

  it("ends a watch at a malformed event (no object, no metadata or name, an unknown type), logs and counts it, "
    .. "and lists again, never taking what followed it, and goes on watching", function()
    -- before, an event whose object was null ended the informer's task:
    -- nothing logged, no watch again, /readyz still 200
    local server, code, out, err = run_informer("malformed", [[
      print("watched", cached("watch-after"), inf:get("default", "never-seen") ~= nil,
        inf:get("default", "surprise") ~= nil, inf:get("default", "cm-0") ~= nil)
      print("counted", sample('luaop_watch_malformed_events_total{resource="v1/ConfigMap"}'))
      inf:stop()
    ]], "informer.MIN_BACKOFF = 0.05 -- five failures in a row: 0.05 to 1.6 s, not 0.8 to 25.6")
    assert.are.equal(0, code, err)
    assert.matches("watched\ttrue\tfalse\tfalse\ttrue", out)
    assert.matches("counted\t5", out)
    for _, why in ipairs { "ADDED, whose object is null", "MODIFIED, whose object is a string",
                           'an unknown type, \\"SURPRISE\\"', "ADDED, whose object has no metadata",
                           "DELETED, whose object has no name" } do
      assert.matches("list/watch failed, listing again[^\n]*malformed watch event: " .. why:gsub("%p", "%%%0"), err)
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
  -- The fake server's GETs of ConfigMaps: paged LISTs (first pages), and
  -- watches (not streamed lists), with when each arrived (server time).
  local function configmap_gets(server)
    local text = server.control("times")
    local lists, watches, streams = {}, {}, 0
    for _, e in ipairs(require("luaop.core").json.decode(text)) do
      local path, t = e[1], e[2]
      if path:match("^/api/v1/namespaces/default/configmaps%?") then
        local streamed = path:find("sendInitialEvents", 1, true) -- luaop's first try (refused)
        if streamed then streams = streams + 1 end
        if path:find("watch=true", 1, true) then
          if not streamed then watches[#watches + 1] = t end
        elseif not path:find("continue=", 1, true) then
          lists[#lists + 1] = t
        end
      end
    end
    return lists, watches, streams
  end

  -- The retryIn of each log line that matches pattern, in order.
  local function waits(err, pattern)
    local out = {}
    for line in err:gmatch("[^\n]+") do
      if line:find(pattern) then out[#out + 1] = tonumber(line:match('"retryIn": ([%d.e+-]+)')) end
    end
    return out
  end

  it("lists again after a 410 only after a backoff that doubles from 0.8 s (client-go's), logged and counted, "
    .. "not as fast as the server answers, and in pages, never asking again for the stream the server refused "
    .. "(a trimmed cache's watch too)", function()
    -- before: 21 LISTs a second against a server that answers every watch
    -- 410; and a trimmed cache's 410 (its Status cut as its objects) was
    -- read as an HTTP 500 without a message
    local server, code, out, err = run_informer("gone", [[
      luaop.sleep(5)
      print("failures", sample('luaop_watch_failures_total{resource="ConfigMap",namespace="default",reason="Expired"}'))
      print("relists", sample('luaop_informer_relists_total{resource="ConfigMap",namespace="default"}'))
      inf:stop()
    ]], nil, 'trim = { keep = { "data.k" } }')
    assert.are.equal(0, code, err)
    local lists, _, streams = configmap_gets(server)
    -- the first sync's stream was refused (422): the relists are LISTs
    assert.are.equal(1, streams, "a relist asked for a stream again")
    -- waits of 0.8-1.6, 1.6-3.2, 3.2-6.4 s: two to four LISTs in 5 s
    assert.is_true(#lists >= 2 and #lists <= 4, ("%d LISTs in 5 s"):format(#lists))
    local w = waits(err, "resourceVersion too old, listing again")
    assert.is_true(#w >= 2, err)
    assert.is_true(w[1] >= 0.8 and w[1] < 1.6, tostring(w[1]))
    for i = 2, #w do assert.is_true(w[i] > w[i - 1], ("wait %d: %s after %s"):format(i, w[i], w[i - 1])) end
    assert.are.equal(#w, tonumber(out:match("failures\t(%d+)")), out)
    assert.are.equal(#lists - 1, tonumber(out:match("relists\t(%d+)")), out)
  end)

  it("lists again, after the backoff, when a watch ends with a Status other than 410 (an InternalError in the "
    .. "stream), logging its reason, and in pages, never asking again for the stream the server refused (400) "
    .. "(a trimmed cache's watch too)", function()
    -- before: the same resourceVersion watched again every 0.8 s, never a LIST
    local server, code, out, err = run_informer("status500", [[
      luaop.sleep(3)
      print("failures", sample('luaop_watch_failures_total{resource="ConfigMap",namespace="default",reason="Status"}'))
      inf:stop()
    ]], nil, 'trim = { drop = { "code", "message", "reason" } }')
    assert.are.equal(0, code, err)
    local lists, watches, streams = configmap_gets(server)
    assert.are.equal(1, streams, "a relist asked for a stream again")
    -- LISTs at 0, then after 0.8-1.6 s, then 1.6-3.2 s more: two or three
    assert.is_true(#lists >= 2 and #lists <= 3, ("%d LISTs in 3 s"):format(#lists))
    assert.is_true(#watches <= #lists, ("%d watches, %d LISTs"):format(#watches, #lists))
    assert.matches('list/watch failed, listing again[^\n]*InternalError %(500%): etcd is unhappy', err)
    assert.is_true(tonumber(out:match("failures\t(%d+)")) >= 1, out)
  end)

  it("lists in pages, with a log line, when a streamed sync has not ended its initial events in time", function()
    -- before: unsynced, with no log line, until the server ended the stream
    local _, code, out, err = run_informer("noend", [[
      print("synced after", luaop.time.monotonic() - began, inf:get("default", "cm-4") ~= nil,
        inf:get("default", "streamed") ~= nil)
      print("failures", sample('luaop_watch_failures_total{resource="ConfigMap",namespace="default",reason="NoInitialEventsEnd"}'))
      inf:stop()
    ]], "informer.INITIAL_EVENTS_TIMEOUT = 1; local began = luaop.time.monotonic()")
    assert.are.equal(0, code, err)
    -- the stream holds for 20 s; given up after 1
    local after = tonumber(out:match("synced after\t([%d.]+)"))
    assert.is_true(after >= 1 and after < 10, out)
    assert.matches("synced after\t[%d.]+\ttrue\tfalse", out) -- the LIST's state, not the stream's
    assert.matches("streaming the list failed: listing in pages this time[^\n]*had not ended its initial events", err)
    assert.matches("failures\t1", out)
  end)

  it("ends a watch at a line longer than 16 MiB, within bounded memory, and lists again", function()
    -- before: the line was read to its end, however long (5.9 GB in 16 s)
    local _, code, out, err = run_informer("endless", [[
      print("watched", cached("watch-after"))
      print("peak MiB", status_mib("VmHWM"))
      print("failures", sample('luaop_watch_failures_total{resource="ConfigMap",namespace="default",reason="FrameTooLarge"}'))
      inf:stop()
    ]], "informer.MIN_BACKOFF = 0.05")
    assert.are.equal(0, code, err)
    assert.matches("watched\ttrue", out)
    assert.matches("list/watch failed, listing again[^\n]*longer than 16 MiB", err)
    assert.matches("failures\t1", out)
    -- a frame of at most 16 MiB, in a buffer of at most 32 (the ASan
    -- build's allocator keeps what was freed in its quarantine)
    local peak = tonumber(out:match("peak MiB\t(%d+)"))
    assert.is_true(peak < (luaop.bin:find("asan", 1, true) and 400 or 100), out)
  end)

  it("honours a watch's Retry-After (a 429 when it starts)", function()
    local server, code, _, err = run_informer("later", [[
      cached("watch-after")
      inf:stop()
    ]])
    assert.are.equal(0, code, err)
    local _, watches = configmap_gets(server)
    assert.is_true(#watches >= 2, #watches .. " watches")
    -- (the loop's clock counts whole milliseconds: 2 s to within one)
    assert.is_true(watches[2] - watches[1] >= 1.99, ("asked again %.3f s after a Retry-After of 2"):format(
      watches[2] - watches[1]))
  end)

  it("ends a LIST page that does not come within informer.LIST_TIMEOUT, and lists again after the backoff",
    function()
      -- before: an informer whose LIST stalled waited for it forever
      local server, code, out, err = run_informer("stalllist", [[
        print("synced after", luaop.time.monotonic() - began, inf:get("default", "cm-4") ~= nil)
        inf:stop()
      ]], "informer.LIST_TIMEOUT = 1; local began = luaop.time.monotonic()")
      assert.are.equal(0, code, err)
      local after = tonumber(out:match("synced after\t([%d.]+)"))
      assert.is_true(after >= 1 and after < 10, out)
      assert.matches("synced after\t[%d.]+\ttrue", out)
      assert.matches("list/watch failed, listing again[^\n]*Timeout", err)
      assert.is_true(#configmap_gets(server) >= 2)
    end)

  it("ends a watch that sends nothing past its timeoutSeconds, and watches again from where it was", function()
    -- before: a watch that stalled without closing stalled its informer
    local _, code, out, err = run_informer("stallwatch", [[
      print("watched", cached("watch-after"))
      inf:stop()
    ]], "informer.WATCH_TIMEOUT = { 1, 1 }; require('luaop.client').WATCH_SLACK = 1")
    assert.are.equal(0, code, err)
    assert.matches("watched\ttrue", out)
    assert.matches("list/watch failed, watching again[^\n]*Timeout", err)
    assert.is_nil(err:find("listing again", 1, true), err)
  end)

  it("holds a watch that sends faster than it is read at 16 MiB of unread lines, losing none of them", function()
    -- before: every line the server sent was kept until read (a flood of
    -- 60 MB into a reader that had not started: all of it in memory)
    local server = fake.start()
    finally(server.stop)
    local code, out, err = luaop.run(luaop.STATUS_MIB .. [[
      local luaop = require "luaop"
      local w = assert(luaop.client():watch("ConfigMap", { namespace = "default", label_selector = "flood" }))
      luaop.sleep(3) -- the server sends all it can meanwhile
      local before = status_mib("VmHWM")
      local n, last = 0, nil
      for _, obj in w:events() do n = n + 1; last = obj.metadata.name end
      print("read", n, last, tostring(w.err), "peak MiB", before, status_mib("VmHWM"))
    ]], { kubeconfig = server.kubeconfig, flags = { "--qps", "0" } })
    assert.are.equal(0, code, err)
    assert.matches("read\t200000\tf%-199999\tnil", out)
    local waiting, reading = out:match("peak MiB\t(%d+)\t(%d+)")
    -- 16 MiB of lines and the process (ASan's shadow memory besides) while
    -- the server waits; and, reading, what decoding leaves for the
    -- collector (not under ASan, whose allocator keeps what was freed)
    local asan = luaop.bin:find("asan", 1, true) ~= nil
    assert.is_true(tonumber(waiting) < (asan and 150 or 45), out)
    assert.is_true(asan or tonumber(reading) < 45, out)
  end)

  it("backs off as client-go's reflector: 0.8 s doubling to 30 s, jittered up to twice, from 0.8 s again after "
    .. "2 healthy minutes", function()
    local code, out, err = luaop.run([[
      local b = require("luaop.informer").backoff()
      local t, line = 1000, {}
      for _ = 1, 8 do line[#line + 1] = ("%.2f"):format(b:next(t)); t = t + 1 end
      t = t + 121 -- a healthy period
      line[#line + 1] = ("%.2f"):format(b:next(t))
      print(table.concat(line, " "))
    ]], { offline = true })
    assert.are.equal(0, code, err)
    local w = {}
    for v in out:gmatch("[%d.]+") do w[#w + 1] = tonumber(v) end
    local base = { 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30, 0.8 }
    assert.are.equal(#base, #w, out)
    for i, b in ipairs(base) do
      assert.is_true(w[i] >= b and w[i] <= 2 * b, ("wait %d: %s, for a base of %s"):format(i, w[i], b))
    end
  end)

  it("keeps the newer state of an object when a watch sends an older one after it (twice, or out of order)",
    function()
      local code, out, err = luaop.run([[
        local inf = require("luaop.informer").new("ConfigMap", { client = {} })
        local updates = 0
        inf:on { update = function() updates = updates + 1 end }
        local function cm(rv, v)
          return { metadata = { namespace = "default", name = "a", uid = "u1", resourceVersion = tostring(rv) },
            data = { v = v } }
        end
        inf:apply("ADDED", cm(10, "first"))
        inf:apply("MODIFIED", cm(12, "newer"))
        inf:apply("MODIFIED", cm(11, "older")) -- late
        inf:apply("MODIFIED", cm(12, "newer")) -- twice
        print("kept", inf:get("default", "a").data.v, "updates", updates, "rv", inf.rv)
      ]], { offline = true })
      assert.are.equal(0, code, err)
      assert.matches("kept\tnewer\tupdates\t1\trv\t12", out)
    end)

  it("keeps the newer state of an object when the answer to this process's own write is older than what its "
    .. "watch brought meanwhile", function()
    local code, out, err = luaop.run([[
      local inf = require("luaop.informer").new("ConfigMap", { client = {} })
      local function cm(rv, v)
        return { metadata = { namespace = "default", name = "a", uid = "u1", resourceVersion = tostring(rv) },
                 data = { v = v } }
      end
      inf:upsert(cm(10, "listed"))
      inf:upsert(cm(12, "watched")) -- another writer's change, already watched
      inf:observe(cm(11, "mine")) -- this process's write, answered late
      print("kept", inf:get("default", "a").data.v)
      inf:observe(cm(13, "mine again")) -- newer: taken at once
      print("then", inf:get("default", "a").data.v)
    ]], { offline = true })
    assert.are.equal(0, code, err)
    assert.matches("kept\twatched", out)
    assert.matches("then\tmine again", out)
  end)

  it("keeps an object this process deleted while finalizers hold it, as the API server answered (its "
    .. "deletionTimestamp), with no tombstone", function()
    local code, out, err = luaop.run([[
      local inf = require("luaop.informer").new("ConfigMap", { client = {} })
      local md = { namespace = "default", name = "a", uid = "u1", resourceVersion = "10" }
      inf:upsert({ metadata = md })
      local held = { metadata = { namespace = "default", name = "a", uid = "u1", resourceVersion = "11",
        deletionTimestamp = "2026-11-26T00:00:00Z", finalizers = { "example.com/hold" } } }
      inf:observe_delete("default", "a", "u1", held)
      local got = inf:get("default", "a")
      print("kept", got and got.metadata.deletionTimestamp, got and got.metadata.resourceVersion,
        "tombstones", next(inf.tombstones) == nil)
    ]], { offline = true })
    assert.are.equal(0, code, err)
    assert.matches("kept\t2026%-11%-26T00:00:00Z\t11\ttombstones\ttrue", out)
  end)

  it("keeps no tombstone once its object's DELETED came, though the name was made again meanwhile", function()
    local code, out, err = luaop.run([[
      local inf = require("luaop.informer").new("ConfigMap", { client = {} })
      local function cm(uid, rv)
        return { metadata = { namespace = "default", name = "a", uid = uid, resourceVersion = tostring(rv) } }
      end
      inf:upsert(cm("u1", 10))
      inf:observe_delete("default", "a", "u1") -- this process deleted it
      inf:upsert(cm("u1", 11)) -- an event from before the delete: ignored
      print("stale ignored", inf:get("default", "a") == nil)
      inf:upsert(cm("u2", 13)) -- the name made again
      inf:remove(cm("u1", 12)) -- the first one's DELETED, late
      print("kept", inf:get("default", "a").metadata.uid, "tombstones", next(inf.tombstones) == nil)
    ]], { offline = true })
    assert.are.equal(0, code, err)
    assert.matches("stale ignored\ttrue", out)
    -- before: the tombstone of u1 stayed until the next relist
    assert.matches("kept\tu2\ttombstones\ttrue", out)
  end)
  -- found by probing with a fake server of one's own (issue 28's hidden
  -- probes): each took the informer's task down (a restart counted against
  -- /healthz), emptied the cache behind a 200 /readyz, looped on a page, or
  -- lost an event
  it("lists again, after its backoff, when a LIST answers a page no API server sends (no metadata, items not a "
    .. "list, an item whose namespace is not a string, a Status with 200, a continue token again), logging and "
    .. "counting it, its task never ended", function()
    local _, code, out, err = run_informer("badlist", [[
      print("listed", inf:get("default", "cm-0") ~= nil, inf:get("default", "cm-4") ~= nil,
        inf:get("default", "never-listed") ~= nil)
      print("counted", sample('luaop_watch_failures_total{resource="ConfigMap",namespace="default",reason="MalformedList"}'))
      inf:stop()
    ]], "informer.MIN_BACKOFF = 0.05 -- seven failures in a row: 0.05 to 3.2 s, not 0.8 to 51")
    assert.are.equal(0, code, err)
    assert.matches("listed\ttrue\ttrue\tfalse", out)
    assert.matches("counted\t7", out)
    for _, why in ipairs { "a list with no metadata", "a list whose items are not a list",
                           "a list whose items are missing", "a list with an item that has a namespace that is not a string",
                           "a continue token again" } do
      assert.matches("list/watch failed, listing again[^\n]*MalformedList[^\n]*the server sent " .. why:gsub("%p", "%%%0"), err)
    end
    assert.is_nil(err:find("a runtime task failed", 1, true), err)
  end)

  it("lists again when a watch sends an event no API server sends (a namespace that is not a string or not the "
    .. "one watched, an empty name, a line cut short), never taking what followed it", function()
    local _, code, out, err = run_informer("badwatch", [[
      print("watched", cached("watch-after"), inf:get("default", "never-seen") ~= nil, inf:get("default", "") ~= nil,
        inf:get("default", "cm-0") ~= nil, #inf:list())
      print("counted", sample('luaop_watch_malformed_events_total{resource="v1/ConfigMap"}'))
      inf:stop()
    ]], "informer.MIN_BACKOFF = 0.05")
    assert.are.equal(0, code, err)
    -- cm-0 stays: the cut DELETED is not taken, and the LIST after it has it
    assert.matches("watched\ttrue\tfalse\tfalse\ttrue\t6", out)
    assert.matches("counted\t4", out)
    for _, why in ipairs { "whose object has a namespace that is not a string",
                           'whose object is in namespace \\"kube-system\\", not the \\"default\\" asked for',
                           "whose object has no name", "unterminated string" } do
      assert.matches("list/watch failed, listing again[^\n]*malformed watch event: [^\n]*" .. why:gsub("%p", "%%%0"), err)
    end
    assert.is_nil(err:find("a runtime task failed", 1, true), err)
    assert.is_nil(err:find("skipping an object", 1, true), err)
  end)

  it("asks discovery again after its backoff when it answers a resource with no name, or does not answer within "
    .. "its timeout (client-go's discovery: 32 s), its task never ended", function()
    for _, mode in ipairs { "shape", "stall" } do
      local server = fake.start()
      finally(server.stop)
      server.control("discovery?mode=" .. mode .. "&times=2")
      local code, out, err = luaop.run(luaop.STATUS_MIB .. [[
        local informer = require "luaop.informer"
        informer.MIN_BACKOFF = 0.05
        require("luaop.client").DISCOVERY_TIMEOUT = 1
        local inf = informer.new("ConfigMap", { namespace = "default" })
        inf:start()
        inf:wait_synced()
        -- the LIST's five (the watch's ADDED "new" may follow them in)
        local listed = 0
        for _, o in ipairs(inf:list()) do
          if o.metadata.name:match("^cm%-%d$") then listed = listed + 1 end
        end
        print("synced", listed)
        inf:stop()
      ]], { kubeconfig = server.kubeconfig, flags = { "--qps", "0" } })
      assert.are.equal(0, code, err)
      assert.matches("synced\t5", out)
      assert.matches(mode == "shape" and "list/watch failed[^\n]*MalformedDiscovery[^\n]*a resource that has no name"
        or "list/watch failed[^\n]*timed out", err)
      assert.is_nil(err:find("a runtime task failed", 1, true), err)
    end
  end)
end)
