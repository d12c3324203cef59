-- `luaop --check PATH...`: scripts checked with no cluster and no
-- kubeconfig, each finding as file:line: message; and, in --script mode, a
-- script that does not compile named before any kubeconfig is looked for.
local proc = require "support.proc"

-- No kubeconfig anywhere: none in the environment, a home without one, not
-- in a Pod.
local NO_CLUSTER = { KUBECONFIG = false, HOME = "/nonexistent", KUBERNETES_SERVICE_HOST = false }

local OK = [[
local luaop = require "luaop"
return luaop.controller {
  name = "%s",
  resource = "v1/ConfigMap",
  reconcile = function(ctx, req)
    local cm = ctx:get("ConfigMap", req)
    if not cm then return end
  end,
}
]]

for _, bin in ipairs { "build/luaop", "build/asan/luaop" } do
  describe(bin .. " --check", function()
    local dir
    before_each(function() dir = proc.tempdir() end)
    after_each(function() proc.sh("rm -rf " .. dir) end)

    local function write(name, text)
      local f = assert(io.open(dir .. "/" .. name, "w"))
      f:write(text)
      f:close()
      return dir .. "/" .. name
    end

    local function check(...)
      return proc.run({ bin, "--check", ... }, NO_CLUSTER)
    end

    it("passes the shipped operators, one by one and as a directory, with no kubeconfig", function()
      local code, out, err = check("operators/")
      assert.are.equal(0, code, out .. err)
      assert.are.equal("", out)
      assert.matches("luaop %-%-check: 4 scripts, 0 findings", err)
      for _, f in ipairs { "at", "useless-machine", "secret-copy", "pod-watcher" } do
        code, out = check("operators/" .. f .. ".lua")
        assert.are.equal(0, code, f .. ": " .. out)
      end
    end)

    it("finds a syntax error, with file and line, on a machine with no kubeconfig", function()
      local path = write("broken.lua", OK:format("broken"):gsub("if not cm then return end", "if not cm then return"))
      local code, out, err = check(path)
      assert.are.equal(1, code)
      assert.are.equal(path .. ":8: unexpected symbol near ','\n", out)
      assert.matches("1 script, 1 finding", err)
      assert.not_matches("Kubernetes configuration", err)
    end)

    it("finds unknown globals, globals set, and what the sandbox refuses, wherever they are in the code", function()
      local path = write("globals.lua", [[
local luaop = require "luaop"
helper = function() return 1 end
return luaop.controller {
  name = "g",
  resource = "v1/ConfigMap",
  reconcile = function(ctx, req)
    if req.name == "never" then
      print(os.time(), string.format("%d", helper()))
      return lauop.requeue_after(5)
    end
    io.write("x")
  end,
}
]])
      local code, out = check(path)
      assert.are.equal(1, code)
      assert.are.equal(table.concat({
        path .. ":2: setting global helper: declare it local",
        path .. ":9: unknown global lauop",
        path .. ":11: io is not available to luaop scripts (no files in the sandbox)",
      }, "\n") .. "\n", out)
    end)

    it("validates each definition and names the line of the field at fault", function()
      local cases = {
        { "name = \"d\"", "name = \"d\\0x\"", ":4: controller \"d\\0x\": name is 1 to 253 characters, none of them a control character" },
        { "resource = \"v1/ConfigMap\"", "resource = \"v1/configmap\"",
          ":5: controller d: resource \"v1/configmap\": the kind \"configmap\" is not an UpperCamelCase name" },
        { "resource = \"v1/ConfigMap\"", "resource = \"Apps_V1/v1/Deployment\"",
          ":5: controller d: resource \"Apps_V1/v1/Deployment\": the group \"Apps_V1\" is not a DNS subdomain" },
        { "resource = \"v1/ConfigMap\"", "resource = \"1/ConfigMap\"",
          ":5: controller d: resource \"1/ConfigMap\": the version \"1\" is not a Kubernetes version" },
        { "name = \"d\",", "name = (\"x\"):rep(254),",
          ":4: controller \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\": name is 1 to 253 characters" },
        { "name = \"d\",", "name = \"d\\n\",",
          ":4: controller \"d\\10\": name is 1 to 253 characters, none of them a control character" },
        { "resource = \"v1/ConfigMap\",", "resource = \"v1/ConfigMap\",\n  concurrency = 0,",
          ":6: controller d: concurrency must be an integer >= 1" },
        { "resource = \"v1/ConfigMap\",", "resource = \"v1/ConfigMap\",\n  owns = { \"v1/pod\" },",
          ":6: controller d: owns \"v1/pod\": the kind \"pod\" is not an UpperCamelCase name" },
        { "resource = \"v1/ConfigMap\",", "resource = \"v1/ConfigMap\",\n  memory = \"lots\",",
          ":6: controller d: memory must be bytes" },
        { "resource = \"v1/ConfigMap\",", "resource = \"v1/ConfigMap\",\n  instructions = 1.5,",
          ":6: controller d: instructions must be an integer >= 1" },
        { "resource = \"v1/ConfigMap\",", "resource = \"v1/ConfigMap\",\n  watches = { { \"v1/Secret\" } },",
          ":6: controller d: watches: each is { kind, map = function(obj) return requests end }" },
      }
      for _, c in ipairs(cases) do
        local text = ("\n"):rep(1) .. OK:format("d"):gsub(c[1]:gsub("%p", "%%%0"), (c[2]:gsub("%%", "%%%%")))
        local path = write("def.lua", text)
        local code, out = check(path)
        assert.are.equal(1, code, c[2])
        assert.are.equal(1, select(2, out:gsub("\n", "")), out)
        assert.are.equal(path .. c[3], out:sub(1, #path + #c[3]), c[2])
      end
    end)

    it("finds two controllers of one name across scripts, a script that returns none, and no scripts at all", function()
      write("a.lua", OK:format("same"))
      write("b.lua", OK:format("same"))
      write("c.lua", "return 42\n")
      local code, out = check(dir)
      assert.are.equal(1, code)
      assert.matches(dir .. "/b%.lua: two controllers are named same %(the other in " .. dir .. "/a%.lua%)\n", out)
      assert.matches(dir .. "/c%.lua: the script returns no controller definition", out)
      local empty = proc.tempdir()
      code, out = check(empty)
      proc.sh("rm -rf " .. empty)
      assert.are.equal(1, code)
      assert.matches("no %*%.lua script to check", out)
      code, out = check(dir .. "/missing.lua")
      assert.are.equal(1, code)
      assert.matches("cannot read script .*missing%.lua", out)
    end)

    it("gives a script's top level 10 s, and names one that waits", function()
      local path = write("sleeps.lua", "local luaop = require 'luaop'\nluaop.sleep(1e9)\n")
      local code, out = check(path)
      assert.are.equal(1, code)
      assert.are.equal(path .. ": its top level did not finish within 10 s: it waits, and a top level only defines "
        .. "controllers\n", out)
    end)

    it("runs a script's top level under the load budget", function()
      local path = write("loop.lua", "while true do end\n")
      local code, out = check(path)
      assert.are.equal(1, code)
      assert.matches("^" .. path:gsub("%p", "%%%0") .. ":1: .*instruction budget", out)
    end)

    it("needs a path, and does not go with --program", function()
      local code, _, err = proc.run { bin, "--check" }
      assert.are.equal(2, code)
      assert.matches("%-%-check needs a script or a directory", err)
      code, _, err = proc.run { bin, "--check", "--program", "x.lua" }
      assert.are.equal(2, code)
      assert.matches("%-%-check checks scripts: not with %-%-program", err)
    end)

    it("in --script mode, names a script that does not compile before looking for a kubeconfig", function()
      local path = write("broken.lua", "return {\n")
      local code, _, err = proc.run({ bin, "--script", path }, NO_CLUSTER)
      assert.are.equal(1, code)
      assert.matches("cannot load scripts", err)
      assert.matches(path:gsub("%p", "%%%0") .. ":2: ", err)
      assert.not_matches("Kubernetes configuration", err)
      -- a script that compiles gets as far as the kubeconfig
      code, _, err = proc.run({ bin, "--script", write("ok.lua", OK:format("ok")) }, NO_CLUSTER)
      assert.are.equal(1, code)
      assert.matches("no Kubernetes configuration", err)
    end)
  end)
end
