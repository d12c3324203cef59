-- The HTTP layer against a fake API server (spec/support/fake_apiserver.py):
-- retries of 429 and 5xx-with-Retry-After, redirects not followed, per-request
-- timeouts, the client-side rate limit, and errors that keep the server's
-- reason.
local luaop = require "support.luaop"
local fake = require "support.fake"
local proc = require "support.proc"

describe("the HTTP layer", function()
  local plain, tls, dir, kubeconfig, log

  local function requests() return plain.requests() end

  local function run(source, flags, kc)
    return luaop.run("local core = require 'luaop.core'\nlocal c = require('luaop').client()\n" .. source,
      { kubeconfig = kc or kubeconfig, flags = flags })
  end

  setup(function()
    plain = fake.start()
    tls = fake.start { tls = true }
    dir, kubeconfig, log = plain.dir, plain.kubeconfig, plain.log
  end)

  teardown(function()
    if plain then plain.stop() end
    if tls then tls.stop() end
  end)

  before_each(function()
    os.remove(log)
  end)

  it("sends the bearer token, never logs it, and keeps the server's reason and message", function()
    local code, out, err = run([[
      local cm = assert(core.api.request { path = "/api/v1/namespaces/default/configmaps/ok" })
      print("status", cm)
      local status, body = core.api.request { path = "/api/v1/namespaces/default/configmaps/nothing" }
      print("missing", status, require("luaop.client").error(status, body).reason)
    ]], { "-v", "10" })
    assert.are.equal(0, code, out)
    -- at the most verbose level, requests are logged (so the check can fail)
    assert.matches("configmaps/nothing", err)
    assert.is_nil((out .. err):find("good-token", 1, true), "the token was logged")
    assert.matches("status\t200", out)
    assert.matches("missing\t404\tNotFound", out)
    assert.are.same({ "GET /api/v1/namespaces/default/configmaps/ok bearer-ok",
                      "GET /api/v1/namespaces/default/configmaps/nothing bearer-ok" }, requests())
  end)

  it("re-reads a token file within a minute of its change, with no 401 to prompt it", function()
    -- client-go's cached token source re-reads the file every minute: the
    -- kubelet rotates a projected token long before the old one expires,
    -- so both are good and nothing but the clock makes luaop read it again
    local token = proc.write(dir, "token", "good-token\n")
    local kc = proc.write(dir, "token-kubeconfig", (proc.read(plain.kubeconfig):gsub("{token: good%-token}", "{tokenFile: token}")))
    local code, out = run(([[
      local monotonic = require("luaop").time.monotonic
      local t0 = monotonic()
      assert(c:get("ConfigMap", "ok", "default"))
      local f = assert(io.open(%q, "w"))
      f:write("next-token\n")
      f:close()
      print("rotated")
      while monotonic() - t0 < 75 do
        local cm, err = c:get("ConfigMap", "ok", "default")
        if not cm then print("error", err.reason); return 1 end
        local log = assert(io.open(%q)):read("a")
        if log:find("bearer%%-next\n$") then print("switched after", monotonic() - t0); return 0 end
        require("luaop").sleep(0.5)
      end
      print("never switched")
      return 1
    ]]):format(token, log), nil, kc)
    assert.are.equal(0, code, out)
    local after = tonumber(out:match("switched after\t([%d.]+)"))
    -- read at the latest when the program started; the loop asks every 0.5 s
    assert.is_true(after ~= nil and after <= 62, out)
    for _, l in ipairs(requests()) do
      assert.matches(" bearer%-[a-z]+$", l, "every request went with a good token")
    end
  end)

  it("retries 429 after Retry-After, and 5xx only when the server says when", function()
    local code, out = run([[
      print("flaky", core.api.request { path = "/api/v1/namespaces/default/configmaps/flaky-3" })
      print("busy", core.api.request { path = "/api/v1/namespaces/default/configmaps/busy" })
      print("dated", core.api.request { path = "/api/v1/namespaces/default/configmaps/dated" })
      print("broken", core.api.request { path = "/api/v1/namespaces/default/configmaps/broken" })
    ]])
    assert.are.equal(0, code, out)
    assert.matches("flaky\t200", out)
    assert.matches("busy\t200", out)
    assert.matches("dated\t200", out)
    assert.matches("broken\t500", out)
    local n = {}
    for _, l in ipairs(requests()) do
      local name = l:match("configmaps/(%S+)")
      n[name] = (n[name] or 0) + 1
    end
    assert.are.same({ ["flaky-3"] = 4, busy = 2, dated = 2, broken = 1 }, n)
  end)

  it("gives up on 429 after ten retries", function()
    local code, out = run([[
      print("status", core.api.request { path = "/api/v1/namespaces/default/configmaps/flaky-100" })
    ]])
    assert.are.equal(0, code, out)
    assert.matches("status\t429", out)
    assert.are.equal(11, #requests())
  end)

  it("answers with the 429 when waiting for a retry would outlast the request's timeout", function()
    local code, out = run([[
      local t0 = core.task.now()
      local status = core.api.request { path = "/api/v1/namespaces/default/configmaps/later", timeout = 1 }
      print("status", status, core.task.now() - t0 < 1)
    ]])
    assert.are.equal(0, code, out)
    assert.matches("status\t429\ttrue", out)
    assert.are.equal(1, #requests())
  end)

  it("never follows a redirect, so credentials go nowhere else", function()
    local code, out = run([[
      print("status", core.api.request { path = "/api/v1/namespaces/default/configmaps/redirect" })
    ]])
    assert.are.equal(0, code, out)
    assert.matches("status\t302", out)
    for _, l in ipairs(requests()) do
      assert.is_nil(l:find("/stolen", 1, true), l)
    end
  end)

  it("asks for no compression of a watch, which it could not pause while decoding", function()
    -- (from v1.37 the API server gzips a watch when asked; this libcurl
    -- fails a paused transfer it is decoding: every stream ended at once)
    local code, out, err = run([[
      local w = assert(c:watch("ConfigMap", { namespace = "default", label_selector = "gzip" }))
      local typ, obj = w:next()
      print("watched", typ, obj and obj.metadata.name)
      w:close()
    ]])
    assert.are.equal(0, code, err)
    assert.matches("watched\tADDED\tasked%-identity", out)
  end)

  it("asks for gzip and decodes a gzipped answer", function()
    local code, out, err = run([[
      local cm = assert(c:get("ConfigMap", "gzip", "default"))
      print("encoding", cm.data.encoding)
    ]])
    assert.are.equal(0, code, err)
    assert.matches("encoding\tgzip", out)
  end)

  it("times a request out", function()
    local code, out = run([[
      local t0 = core.task.now()
      local status, err = core.api.request { path = "/api/v1/namespaces/default/configmaps/slow", timeout = 0.3 }
      print("result", status, err)
      print("waited under 2s", core.task.now() - t0 < 2)
    ]])
    assert.are.equal(0, code, out)
    assert.matches("result\tnil\t[^\n]*timed out", out)
    assert.matches("waited under 2s\ttrue", out)
  end)

  it("sends basic credentials, and never logs the password", function()
    local port = io.open(dir .. "/port"):read("l")
    local code, out, err = luaop.run([[
      print("status", require("luaop.core").api.request { path = "/api/v1/namespaces/default/configmaps/ok" })
    ]], { kubeconfig = proc.write(dir, "basic", ([[
current-context: x
clusters: [{name: x, cluster: {server: "http://127.0.0.1:%s"}}]
contexts: [{name: x, context: {cluster: x, user: alice}}]
users: [{name: alice, user: {username: alice, password: s3cr3t-pw}}]
]]):format(port)), flags = { "-v", "10" } })
    assert.are.equal(0, code, err)
    assert.matches("status\t200", out)
    assert.are.same({ "GET /api/v1/namespaces/default/configmaps/ok basic-ok" }, requests())
    assert.is_nil((out .. err):find("s3cr3t", 1, true))
  end)

  it("goes through the kubeconfig's proxy-url", function()
    local port = io.open(dir .. "/port"):read("l")
    local code, out, err = luaop.run([[
      print("status", require("luaop.core").api.request { path = "/api/v1/namespaces/default/configmaps/ok" })
    ]], { kubeconfig = proc.write(dir, "proxy", ([[
current-context: x
clusters: [{name: x, cluster: {server: "http://api.example.invalid", proxy-url: "http://127.0.0.1:%s"}}]
contexts: [{name: x, context: {cluster: x, user: u}}]
users: [{name: u, user: {token: good-token}}]
]]):format(port)) })
    assert.are.equal(0, code, err)
    assert.matches("status\t200", out)
    assert.are.same({ "GET http://api.example.invalid/api/v1/namespaces/default/configmaps/ok bearer-ok" }, requests())
  end)

  it("reports a connection failure as a TransportError", function()
    local bad = dir .. "/unreachable"
    local f = assert(io.open(bad, "w"))
    f:write([[
current-context: x
clusters: [{name: x, cluster: {server: "http://127.0.0.1:1"}}]
contexts: [{name: x, context: {cluster: x}}]
]])
    f:close()
    local code, out = luaop.run([[
      local _, err = require("luaop").client():get("ConfigMap", "x")
      print(err.code, err.reason, err.message)
    ]], { kubeconfig = bad })
    assert.are.equal(0, code, out)
    assert.matches("0\tTransportError\t.*[Cc]onnect", out)
  end)

  it("spaces requests to --qps after the --burst, however long it was idle, and not at all with --qps 0", function()
    -- (idle first: 1.2 s refill no more than the burst's one token)
    local program = [[
      require("luaop").sleep(1.2)
      local t0 = core.task.now()
      local tasks = {}
      for i = 1, 6 do
        tasks[i] = require("luaop").spawn(core.api.request, { path = "/api/v1/namespaces/default/configmaps/ok" })
      end
      for _, t in ipairs(tasks) do assert(t:wait()) end
      print("elapsed", core.task.now() - t0)
    ]]
    local code, out = run(program, { "--qps", "5", "--burst", "1" })
    assert.are.equal(0, code, out)
    -- one at once, then five more at 5 per second: at least a second
    assert.is_true(tonumber(out:match("elapsed\t(%S+)")) >= 0.95, out)
    -- --qps 0: no limit, whatever the burst (5/s after a burst of 1 took a second)
    code, out = run(program, { "--qps", "0", "--burst", "1" })
    assert.are.equal(0, code, out)
    assert.are.equal(6, #requests() - 6)
    assert.is_true(tonumber(out:match("elapsed\t(%S+)")) < 0.5, out)
  end)

  it("does not limit requests by default, as controller-runtime does, and --qps N has a burst of 30", function()
    -- one request after another (the limiter counts them all the same)
    local function elapsed(n, flags)
      local code, out, err = run(([[
        local t0 = core.task.now()
        for _ = 1, %d do assert(core.api.request { path = "/api/v1/namespaces/default/configmaps/ok" }) end
        print("elapsed", core.task.now() - t0)
      ]]):format(n), flags)
      assert.are.equal(0, code, err)
      return tonumber(out:match("elapsed\t(%S+)"))
    end
    -- by default none waits: 60 requests (20/s after 30 would take 1.5 s)
    local free = elapsed(60)
    assert.is_true(free < 0.45, ("60 requests by default took %.2f s"):format(free))
    -- --qps 20: the burst, 30 without waiting (a burst of 10 would take a second at 20/s)
    local burst = elapsed(30, { "--qps", "20" })
    assert.is_true(burst < 0.6, ("30 requests took %.2f s"):format(burst))
    -- ten more wait for tokens at 20/s: half a second at least
    local more = elapsed(40, { "--qps", "20" })
    assert.is_true(more >= 0.45, ("40 requests at --qps 20 took %.2f s"):format(more))
  end)

  it("pages a list whose metadata follows its items, each page asked for before the last is decoded", function()
    local code, out = run([[
      local list = assert(c:list("ConfigMap", { namespace = "default", limit = 2 }))
      local names = {}
      for _, cm in ipairs(list.items) do names[#names + 1] = cm.metadata.name .. "/" .. cm.kind end
      print("names", table.concat(names, " "))
      print("rv", list.metadata.resourceVersion, list.metadata["continue"])
      -- how many requests had gone out when each page was handed over
      local before, asked = core.api.requests(), {}
      assert(c:list("ConfigMap", { namespace = "default", limit = 2,
        each_page = function() asked[#asked + 1] = core.api.requests() - before end }))
      print("asked", table.concat(asked, " "))
    ]])
    assert.are.equal(0, code, out)
    assert.matches("names\tcm%-0/ConfigMap cm%-1/ConfigMap cm%-2/ConfigMap cm%-3/ConfigMap cm%-4/ConfigMap\n", out)
    assert.matches("rv\t7\tnil", out)
    -- the next page was on its way while each page was handed over (one
    -- after the other would read 1 2 3)
    assert.matches("asked\t2 3 3", out)
    local lists, pages = {}, { "GET /api/v1/namespaces/default/configmaps?limit=2 bearer-ok",
                               "GET /api/v1/namespaces/default/configmaps?continue=2&limit=2 bearer-ok",
                               "GET /api/v1/namespaces/default/configmaps?continue=4&limit=2 bearer-ok" }
    for _, l in ipairs(requests()) do
      if l:find("configmaps?", 1, true) then lists[#lists + 1] = l end
    end
    assert.are.same({ pages[1], pages[2], pages[3], pages[1], pages[2], pages[3] }, lists)
  end)

  it("says which JSON was malformed, with the answer's status", function()
    local code, out = run([[
      local _, err = c:get("ConfigMap", "notjson", "default")
      print("err", err.code, err.reason, err.message)
    ]])
    assert.are.equal(0, code, out)
    assert.matches("err\t200\tInternalError\tthe server sent malformed JSON: .* at byte %d+", out)
  end)

  it("keeps a started request's answer until it is waited for, once", function()
    local code, out = run([[
      local r = core.api.start { path = "/api/v1/namespaces/default/configmaps/ok" }
      local missing = core.api.start { path = "/api/v1/namespaces/default/configmaps/nothing" }
      -- both answered before anything waits for them (the case titled)
      local deadline = core.task.now() + 10
      while not (r:answered() and missing:answered()) and core.task.now() < deadline do core.task.sleep(0.01) end
      print("answered", r:answered(), missing:answered())
      print("ok", r:wait())
      print("again", pcall(r.wait, r))
      print("missing", (missing:wait()))
      print("done")
    ]])
    assert.are.equal(0, code, out)
    assert.matches("answered\ttrue\ttrue", out)
    assert.matches('ok\t200\t{"apiVersion": "v1", "kind": "ConfigMap"', out)
    assert.matches("again\tfalse\t.*answer was taken already", out)
    assert.matches("missing\t404", out)
    assert.matches("done", out)
  end)

  it("cancels a request nobody can wait for any more once it is collected, and one cancel() is called on", function()
    local code, out, err = run([[
      -- true once the fake API server answers path with 200 (within 10 s)
      local function until_ok(path)
        local deadline = core.task.now() + 10
        repeat
          if core.api.request { path = path } == 200 then return true end
          core.task.sleep(0.02)
        until core.task.now() > deadline
        return false
      end
      local function gone(name) return until_ok("/gone/" .. name) end
      local kept = core.api.start { path = "/api/v1/namespaces/default/configmaps/held-kept" }
      core.api.start { path = "/api/v1/namespaces/default/configmaps/held-collected" }
      assert(until_ok("/arrived/kept") and until_ok("/arrived/collected"), "both sent")
      collectgarbage()
      print("collected", gone("collected"))
      print("kept", core.api.request { path = "/gone/kept" })
      kept:cancel()
      print("cancelled", gone("kept"), pcall(kept.wait, kept))
    ]], { "--qps", "0" })
    assert.are.equal(0, code, err)
    assert.matches("collected\ttrue", out)
    assert.matches("kept\t404", out) -- still waited on: still there
    assert.matches("cancelled\ttrue\tfalse\t.*answer was taken already", out)
  end)

  it("sends a request at once while an earlier one waits for its answer, over plain HTTP and TLS", function()
    for _, kc in ipairs { kubeconfig, tls.kubeconfig } do
      local code, out, err = run([[
        local first = core.api.start { path = "/api/v1/namespaces/default/configmaps/held-first" }
        local t0 = core.task.now()
        print("second", core.api.request { path = "/api/v1/namespaces/default/configmaps/ok" })
        print("elapsed", core.task.now() - t0)
        first:cancel()
      ]], { "--qps", "0" }, kc)
      assert.are.equal(0, code, err)
      assert.matches("second\t200", out)
      -- the first is answered after 10 s, if ever
      assert.is_true(tonumber(out:match("elapsed\t(%S+)")) < 5, out)
    end
  end)

  it("opens at most 8 connections to a server over TLS, and one for each request in flight over plain HTTP", function()
    local program = [[
      core.api.request { path = "/stats?reset" }
      local t0 = core.task.now()
      local tasks = {}
      for i = 1, 30 do
        tasks[i] = require("luaop").spawn(core.api.request, { path = "/api/v1/namespaces/default/configmaps/hold" })
      end
      for _, t in ipairs(tasks) do assert(select(2, t:wait()) == 200) end
      print("elapsed", core.task.now() - t0)
      print("stats", select(2, core.api.request { path = "/stats" }))
    ]]
    -- over TLS (this server speaks HTTP/1.1 only, one request a connection):
    -- 30 requests of 0.3 s each share 8 connections, so they take 4 rounds
    local code, out, err = run(program, { "--qps", "0" }, tls.kubeconfig)
    assert.are.equal(0, code, err)
    assert.matches('"max_connections": 8}', out, 1, true)
    assert.is_true(tonumber(out:match("elapsed\t(%S+)")) >= 1.1, out)
    -- plain HTTP, where HTTP/2 is not spoken: no cap, or long watches would starve the rest
    code, out, err = run(program, { "--qps", "0" })
    assert.are.equal(0, code, err)
    assert.is_true(tonumber(out:match('"max_connections": (%d+)')) >= 30, out)
    assert.is_true(tonumber(out:match("elapsed\t(%S+)")) < 1.1, out)
  end)
end)
