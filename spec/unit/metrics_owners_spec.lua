-- Who owns a metric series (docs/metrics.md#who-owns-a-series): each
-- script's series are charged to an account of its own, capped, and go
-- with the controller or the script they were made for; the runtime keeps
-- a reserve of its own. Against the fake API server (its five ConfigMaps in
-- default), /metrics on port 0, found in luaop's log.
local luaop = require "support.luaop"
local fake = require "support.fake"
local volume = require "support.volume"
local kube = require "support.kube"
local proc = require "support.proc"

local get = proc.http

local function metrics_url(run)
  local err = kube.wait_for("the metrics server's port in the log", 10, function()
    local e = run.stderr()
    return e:find("Serving metrics server", 1, true) and e
  end)
  return "http://127.0.0.1:" .. err:match('Serving metrics server\t{[^}]*"port": (%d+)') .. "/metrics"
end

-- The controllers /metrics has a reconcile_total series of, as a set.
local function controllers(text)
  local out = {}
  for name in text:gmatch('controller_runtime_reconcile_total{controller="([^"]*)",result="success"}') do
    out[name] = true
  end
  return out
end

local function script(names, says)
  local defs = {}
  for _, n in ipairs(names) do
    defs[#defs + 1] = ([[luaop.controller { name = %q, resource = "v1/ConfigMap", namespace = "default",
  reconcile = function(ctx) ctx.log:info(%q) end }]]):format(n, says or (n .. " reconciled"))
  end
  return "local luaop = require \"luaop\"\nreturn {\n" .. table.concat(defs, ",\n") .. "\n}\n"
end

describe("metrics' owners", function()
  local server
  setup(function() server = fake.start() end)
  teardown(function() server.stop() end)

  local function start(files)
    local v = volume.new(files)
    finally(function() v:remove() end)
    local run = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig,
      flags = { "--metrics-bind-address", "127.0.0.1:0" } })
    finally(run.cleanup)
    return run, v
  end

  it("let one script define 600 controllers without stopping luaop's start or another script's load, and keep "
    .. "the runtime's own series", function()
    local big = {}
    for i = 1, 600 do big[i] = ("big-%03d"):format(i) end
    -- big.lua loads first (files load in order of name)
    local run = start { ["big.lua"] = script(big, "big reconciled"), ["small.lua"] = script { "small" } }
    local url = metrics_url(run)
    kube.wait_for("the small script's reconciles", 30, function()
      return run.stderr():find("small reconciled", 1, true)
    end)
    local text = kube.wait_for("the small script's series", 10, function()
      local code, body = get(url)
      return code == 200 and controllers(body).small and body
    end)
    -- the runtime's own series are there
    assert.matches('rest_client_requests_total{code="200",method="GET",host="127.0.0.1:', text, 1, true)
    assert.matches('luaop_cache_objects{resource="v1/ConfigMap",namespace="default"} ', text, 1, true)
    -- the big script got its share, and the rest of its controllers run
    -- without series, saying so
    local n = 0
    for name in pairs(controllers(text)) do
      if name:match("^big%-") then n = n + 1 end
    end
    assert.is_true(n > 50 and n < 120, "big's controllers with series: " .. n)
    assert.matches("this controller's metrics are not recorded", run.stderr(), 1, true)
    assert.matches("script [^ ]*/big.lua holds 2000 metric series, its cap", run.stderr())
    assert.is_false(run.exited())
  end)

  it("free a controller's series when a reload drops it, and a script's when its file goes", function()
    local run, v = start { ["a.lua"] = script { "a-one", "a-two" }, ["b.lua"] = script { "b-one" } }
    local url = metrics_url(run)
    kube.wait_for("every controller's series", 20, function()
      local code, body = get(url)
      local c = controllers(body)
      return code == 200 and c["a-one"] and c["a-two"] and c["b-one"]
    end)
    -- a reload that drops a-two
    v:update { ["a.lua"] = script { "a-one" }, ["b.lua"] = script { "b-one" } }
    local text = kube.wait_for("a-two's series gone", 20, function()
      local _, body = get(url)
      return not controllers(body)["a-two"] and body
    end)
    assert.is_nil(text:find('controller="a-two"', 1, true))
    assert.matches('luaop_script_reloads_total{script="' .. v.dir .. '/a.lua",result="success"} 1', text, 1, true)
    assert.is_true(controllers(text)["a-one"] and controllers(text)["b-one"])
    -- a.lua goes: its controller's series and its reload count go too
    v:update { ["b.lua"] = script { "b-one" } }
    text = kube.wait_for("a.lua's series gone", 20, function()
      local _, body = get(url)
      return not body:find('controller="a-one"', 1, true) and body
    end)
    assert.is_nil(text:find("/a.lua", 1, true))
    assert.is_true(controllers(text)["b-one"])
    assert.matches('workqueue_adds_total{name="b-one",controller="b-one"}', text, 1, true)
  end)
end)
