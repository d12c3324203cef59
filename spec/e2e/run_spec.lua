-- `make run`, the README's first command, as a user runs it: on a terminal
-- of its own (spec/support/terminal.py), against the local control plane
-- this suite already brought up, until a Ctrl-C typed on that terminal.
local kube = require "support.kube"
local proc = require "support.proc"
local system = require "system"

local SOURCE_LABEL = "secretsync.k8s.ziwon.dev/source"

-- The samples gone, whatever became of the run: with luaop stopped the
-- source Secret's finalizer would hold it for ever, so it is taken off.
local function remove_samples()
  kube.kubectl { "delete", "-k", "manifests/samples", "--ignore-not-found", "--wait=false" }
  kube.kubectl { "patch", "secret", "shared-credentials", "-n", "secretsync", "--type=merge",
                 "-p", '{"metadata":{"finalizers":null}}' }
  kube.kubectl { "delete", "secrets", "-A", "-l", SOURCE_LABEL, "--wait=false" }
end

describe("make run", function()
  it("starts the four operators on the local control plane, shows the samples reconciled, and stops luaop at "
    .. "Ctrl-C with status 0, leaving the control plane up", function()
    local dir = proc.tempdir()
    local out, go, status = dir .. "/terminal", dir .. "/ctrl-c", dir .. "/status"
    -- as from a shell: not the make of `make test` above it
    local _, stop = proc.background(("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL python3 spec/support/terminal.py %s %s %s "
      .. "make --no-print-directory run"):format(proc.quote(out), proc.quote(go), proc.quote(status)), dir .. "/driver.log", 600)
    -- make run's exit status once it ended, or nil
    local function ended() local s = proc.read(status) return s ~= "" and s or nil end
    local pid -- luaop's, once make run's display names it
    finally(function()
      if not ended() then
        -- failed before its Ctrl-C: type one, so make run stops luaop as a user would
        os.execute("touch " .. proc.quote(go))
        local deadline = system.gettime() + 40
        while not ended() and system.gettime() < deadline do system.sleep(0.2) end
      end
      stop()
      -- a luaop that Ctrl-C did not stop (the spec failed there): by its
      -- pid, while that is still a luaop
      if pid and proc.read(("/proc/%d/comm"):format(pid)):match("^luaop") then
        os.execute(("kill -KILL %d 2>/dev/null"):format(pid))
      end
      remove_samples()
      proc.sh("rm -rf " .. proc.quote(dir))
    end)
    local function terminal() return proc.read(out) end

    -- luaop is started and the samples applied (the control plane is up
    -- already, and everything built: seconds)
    pid = tonumber(kube.wait_for("make run's display", 180, function()
      return ended() and error("make run ended:\n" .. proc.tail(terminal(), 30))
        or terminal():match("luaop [%w.-]+, pid (%d+), running operators/%*%.lua against https://")
    end))
    -- the useless machine: three switches, all down (the hand-made one up at
    -- first; the newest of four goes), shown as such
    kube.wait_for("machine-1 at ddd on make run's terminal", 60, function()
      return terminal():find("machine%-1%s+3%s+ddd")
    end)
    local switches = kube.list("switches", "default", "-l", "machine=machine-1")
    assert.are.equal(3, #switches)
    for _, s in ipairs(switches) do assert.are.equal("down", s.spec.position, s.metadata.name) end
    -- the secret copier: the sample's copy in default, shown as a copied secret
    kube.wait_for("a copy of shared-credentials on make run's terminal", 60, function()
      return terminal():match("copied secrets:\r?\nNAMESPACE[^\n]*\n[^\n]*default%s+shared%-credentials%s")
    end)
    -- the At: its phase set by the operator (PENDING until its minute)
    assert.matches("example%-at%s+%S+Z%s+echo YAY%s+[PRD][EUO][NE]", terminal())

    -- the samples deleted while it runs: the copier removes its copies first
    kube.must { "delete", "-k", "manifests/samples", "--ignore-not-found", "--timeout=60s" }
    assert.are.same({}, kube.list("secrets", nil, "-l", SOURCE_LABEL))

    -- Ctrl-C
    assert(io.open(go, "w")):close()
    kube.wait_for("make run to end after Ctrl-C", 40, ended)
    assert.are.equal("0", ended():match("%d+"), proc.tail(terminal(), 20))
    assert.matches("luaop stopped with status 0 %(its log: build/run/luaop%.log%)%. The control plane is still up",
      terminal())
    assert.is_false(os.execute("kill -0 " .. pid .. " 2>/dev/null") == true, "luaop still runs")
    local log = proc.read("build/run/luaop.log")
    assert.matches('stopping\t{"signal": "SIGTERM"}', log, nil, true)
    assert.matches("\tmanager\tstopped\t", log, nil, true)
    proc.check_sanitizers("make run's luaop", log)
    assert.is_true(proc.sh("hack/cluster.sh status >/dev/null 2>&1"), "the control plane went down")
  end)
end)
