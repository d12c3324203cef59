-- Leader election's timing of another holder's lease, by client-go's rules:
-- from the moment this process observed the record (when the GET that
-- showed it came back), for the record's own leaseDurationSeconds. Against
-- the fake API server, which holds a Lease for "another" that never renews,
-- can answer its GETs late, and says when it answered each GET and took each
-- write (server time).
local luaop = require "support.luaop"
local fake = require "support.fake"
local volume = require "support.volume"
local kube = require "support.kube"
local json = require("luaop.core").json

local script = [[
local luaop = require "luaop"
return luaop.controller { name = "standby", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function() end }
]]

-- Run a standby with these election flags against a Lease held by
-- "another" (hold: the hold-lease query), until it has taken the lease.
-- Returns the seconds from the first GET that showed "another" to the
-- write that took the lease over, both as the server answered them.
local function takeover(hold, durations)
  local server = fake.start()
  finally(server.stop)
  server.control("hold-lease/spec-lease?" .. hold)
  local v = volume.new { ["standby.lua"] = script }
  finally(function() v:remove() end)
  local flags = { "--leader-elect", "--leader-election-id", "spec-lease", "--leader-election-namespace", "default" }
  for _, f in ipairs(durations) do flags[#flags + 1] = f end
  local run = luaop.start({ v.dir }, { kubeconfig = server.kubeconfig, flags = flags })
  finally(run.cleanup)
  kube.wait_for("the lease acquired", 30, function()
    return run.stderr():find("successfully acquired lease", 1, true)
  end)
  run.stop(0)
  local seen, took
  for _, e in ipairs(json.decode(server.control("lease-log"))) do
    local what, holder, t = e[1], e[2], e[3]
    if what == "GET" and holder == "another" then seen = seen or t end
    if what == "PUT" and holder ~= "another" then took = took or t end
  end
  assert.is_not_nil(seen, "no GET showed the other holder")
  assert.is_not_nil(took, "no takeover was written")
  return took - seen
end

describe("leader election", function()
  it("waits out the holder's leaseDurationSeconds, not its own shorter lease duration, before taking over",
    function()
      -- the holder's record says 3 s; this process's own lease is 1 s
      local waited = takeover("duration=3", { "--leader-elect-lease-duration", "1s",
        "--leader-elect-renew-deadline", "0.5s", "--leader-elect-retry-period", "0.2s" })
      assert.is_true(waited >= 3, ("took over %.2f s after first seeing the holder's 3 s lease"):format(waited))
    end)

  it("times another holder's lease from when its GET came back, so a slow GET never shortens it", function()
    -- each GET answers 2 s late; the record's lease is 4 s, as this
    -- process's: timed from before the GET, it would expire 2 s early
    local waited = takeover("duration=4&delay=2", { "--leader-elect-lease-duration", "4s",
      "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "0.2s" })
    assert.is_true(waited >= 4, ("took over %.2f s after first seeing the holder's 4 s lease"):format(waited))
  end)

  it("times a lease on its own monotonic clock, whatever the holder's renewTime says: a year ahead or behind",
    function()
      -- (the holder's clock is skewed; client-go too times the record from
      -- when it observed it, never from its renewTime)
      for _, renew in ipairs { "2099-01-01T00:00:00.000000Z", "2001-01-01T00:00:00.000000Z" } do
        local waited = takeover("duration=2&renew=" .. renew, { "--leader-elect-lease-duration", "2s",
          "--leader-elect-renew-deadline", "1s", "--leader-elect-retry-period", "0.2s" })
        assert.is_true(waited >= 2 and waited < 4, ("renewTime %s: took over %.2f s after first seeing it")
          :format(renew, waited))
      end
    end)
end)
