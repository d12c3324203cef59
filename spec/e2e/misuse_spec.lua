-- Misuse on the real API server: a mistyped request or object raises at
-- the script's line, named, before any request is sent; it is never the
-- API server's NotFound or Invalid, and never a line of luaop's own.
local kube = require "support.kube"
local luaop = require "support.luaop"

describe("misuse against the API server", function()
  it("a program's client call with a mistyped request or object raises at its line, naming the call", function()
    local code, out, err = luaop.run([[
      local luaop = require "luaop"
      local c = luaop.client()
      print(select(2, pcall(function() local r = c:get("ConfigMap", { name = "kube-root-ca.crt", nmespace = "default" }) return r end)))
      print(select(2, pcall(function() local r = c:get("Namespace", nil) return r end)))
      print(select(2, pcall(function() local r = c:create({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = 5 } }) return r end)))
      -- the same calls well formed reach the API server
      local ok = c:get("ConfigMap", { name = "kube-root-ca.crt", namespace = "default" })
      print(ok and "well formed: found" or "well formed: missing")
    ]])
    assert.are.equal(0, code, err)
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.matches("%.lua:3: client:get%(kind, name_or_req %[, namespace%]%): the request has an unknown field nmespace "
      .. "%(did you mean namespace%?%)", lines[1])
    assert.matches("%.lua:4: client:get%(kind, name_or_req %[, namespace%]%): name_or_req must be a name", lines[2])
    assert.matches("%.lua:5: client:create%(obj %[, opts%]%): obj%.metadata%.name must be a string, got the number 5",
      lines[3])
    assert.are.equal("well formed: found", lines[4])
    assert.is_nil(out:find("NotFound", 1, true))
    assert.is_nil(out:find("lua/luaop/", 1, true))
  end)

  it("a reconcile's mistyped request is a Reconciler error at the script's line, retried, not a NotFound", function()
    local ns = kube.new_namespace("e2e-misuse")
    local run = luaop.start(([[
      local luaop = require "luaop"
      return luaop.controller {
        name = "misuse", resource = "v1/ConfigMap", namespace = %q, field_selector = "metadata.name=m",
        reconcile = function(ctx, req)
          local cm = ctx:get("ConfigMap", { nmae = req.name, namespace = req.namespace })
          return cm
        end,
      }
    ]]):format(ns))
    finally(function()
      run.stop()
      run.cleanup()
      kube.delete_namespace(ns)
    end)
    kube.must { "create", "configmap", "m", "-n", ns }
    kube.wait_for("the misuse retried", 30, function()
      local _, n = run.stderr():gsub("Reconciler error", "")
      return n >= 2
    end)
    local log = run.stderr()
    assert.matches('%.lua:5: ctx:get%(kind, name_or_req %[, namespace%]%): the request has an unknown field nmae '
      .. '%(did you mean name%?%)', log)
    assert.is_nil(log:find("NotFound", 1, true))
  end)
end)
