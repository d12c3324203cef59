-- Modules shared between scripts on the local control plane: two scripts
-- in a directory mounted the way the kubelet mounts a ConfigMap require one
-- module, stamp.lib.lua, and both reconcile with it; a ..data swap that
-- changes only the module reloads both, and their objects are stamped
-- again by its new version; a broken module leaves both serving.
local kube = require "support.kube"
local luaop = require "support.luaop"
local volume = require "support.volume"

-- The module: the stamp it writes, and how.
local function module(version)
  return ([[
local M = { version = %q }
function M.apply(ctx, req, who)
  local cm = ctx:get("ConfigMap", req)
  if not cm then return end
  local want = who .. "-" .. M.version
  if (cm.metadata.annotations or {}).stamp ~= want then
    local _, err = ctx:patch("ConfigMap", req, { metadata = { annotations = { stamp = want } } })
    if err then error(err) end
  end
end
return M
]]):format(version)
end

-- A script whose controller stamps the ConfigMaps labelled app=WHO.
local function script(ns, who)
  return ([[
local luaop = require "luaop"
local stamp = require "stamp"
return luaop.controller {
  name = %q, resource = "v1/ConfigMap", namespace = %q, label_selector = "app=" .. %q,
  reconcile = function(ctx, req) stamp.apply(ctx, req, %q) end,
}
]]):format(who, ns, who, who)
end

describe("modules on the API server", function()
  local ns, vol, run, files

  setup(function()
    ns = kube.new_namespace("e2e-modules")
    files = { ["first.lua"] = script(ns, "first"), ["second.lua"] = script(ns, "second"),
      ["stamp.lib.lua"] = module("1") }
    vol = volume.new(files)
    run = luaop.start({ vol.dir })
  end)

  teardown(function()
    if run then
      run.stop()
      run.cleanup()
    end
    if vol then vol:remove() end
    if ns then kube.delete_namespace(ns) end
  end)

  local function stamp(name)
    local cm = kube.get("configmap", name, ns)
    return cm and cm.metadata.annotations and cm.metadata.annotations.stamp
  end

  local function stamped(name, want)
    return kube.wait_for(name .. " stamped " .. want, 30, function() return stamp(name) == want end)
  end

  local function create(name, app)
    kube.must { "create", "configmap", name, "-n", ns, "--from-literal=k=v" }
    kube.must { "label", "configmap", name, "-n", ns, "app=" .. app }
  end

  it("runs two scripts that share a module, and reloads both when only the module changes", function()
    create("a", "first")
    create("b", "second")
    stamped("a", "first-1")
    stamped("b", "second-1")

    local before = #run.stderr()
    files["stamp.lib.lua"] = module("2")
    vol:update(files)
    stamped("a", "first-2")
    stamped("b", "second-2")
    local after = run.stderr():sub(before)
    for _, who in ipairs { "first", "second" } do
      assert.matches('script reloaded\t{"controllers": "' .. who .. '", "modules": "[^"]*/stamp%.lib%.lua"', after)
    end
  end)

  it("keeps both scripts serving when the module they share breaks, naming its file and line", function()
    local before = #run.stderr()
    files["stamp.lib.lua"] = "local M = {}\nfunction M.apply(\nreturn M\n"
    vol:update(files)
    kube.wait_for("both failed reloads", 10, function()
      local _, n = run.stderr():sub(before):gsub("script reload failed, the running version stays", "")
      return n >= 2
    end)
    assert.matches("stamp%.lib%.lua:3: [^\n]*near 'return'", run.stderr():sub(before))
    create("c", "first")
    create("d", "second")
    stamped("c", "first-2")
    stamped("d", "second-2")
  end)
end)
