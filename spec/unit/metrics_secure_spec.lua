-- luaop.metrics_secure's serving side, with no API server: a luaop program
-- serves /metrics through core.webhook (render = "metrics", a self-signed
-- certificate) with a stand-in reviewer, and curl scrapes it. The reviews
-- themselves are spec/unit/reviews_spec.lua's, the real API server's
-- answers spec/e2e/metrics_secure_spec.lua's.
local luaop = require "support.luaop"
local kube = require "support.kube"
local proc = require "support.proc"

local program = [[
local core = require "luaop.core"
local ms = require "luaop.metrics_secure"
local dir = arg[1]
local server = assert(core.webhook.start { name = "metrics", address = "127.0.0.1:0", render = "metrics" })
local f = assert(io.open(dir .. "/port.tmp", "w"))
f:write(server:port(), " ", server:serial())
f:close()
assert(os.rename(dir .. "/port.tmp", dir .. "/port"))
local reviewer = {}
function reviewer:authorize(header, method, path)
  assert(method == "GET" or method == "HEAD", method)
  assert(path == "/metrics", path)
  if header == "Bearer good" then return 200, "OK" end
  if header == "Bearer bad" then return 403, "Authorization denied for user bad" end
  if header == "Bearer boom" then error("the API server is away") end
  return 401, "Unauthorized"
end
ms.serve(server, reviewer)
]]

describe("secure metrics", function()
  it("serve the registry's text to an authorized client, and 401, 403, 404, 405 or 500 with the reason to others",
    function()
    local dir = proc.tempdir()
    finally(function() proc.sh("rm -rf " .. proc.quote(dir)) end)
    local run = luaop.start(program, { offline = true, exit = 143, flags = { "--", dir } })
    finally(run.cleanup)
    kube.wait_for("the server's port", 20, function()
      assert(not run.exited(), "luaop exited: " .. run.stderr())
      return proc.read(dir .. "/port") ~= ""
    end)
    local port, serial = proc.read(dir .. "/port"):match("^(%d+) (%x+)$")
    port = tonumber(port)
    local function get(path, token, method)
      local out = os.tmpname()
      local _, code = proc.sh(("curl -sS -k -X %s %s -o %s -w '%%{http_code}' https://127.0.0.1:%d%s")
        :format(method or "GET", token and ("-H 'Authorization: Bearer " .. token .. "'") or "", proc.quote(out), port,
          path))
      local body = proc.read(out)
      os.remove(out)
      return tonumber(code), body
    end
    local code, body = get("/metrics", "good")
    assert.are.equal(200, code)
    assert.matches("\n# TYPE process_resident_memory_bytes gauge\n", body, 1, true)
    assert.matches("\n# TYPE process_start_time_seconds gauge\n", body, 1, true)
    assert.are.same({ 401, "Unauthorized\n" }, { get("/metrics") })
    assert.are.same({ 401, "Unauthorized\n" }, { get("/metrics", "unknown") })
    assert.are.same({ 403, "Authorization denied for user bad\n" }, { get("/metrics", "bad") })
    code, body = get("/metrics", "boom")
    assert.are.equal(500, code)
    assert.matches("^Authorization failed: .*the API server is away", body)
    assert.matches("cannot authorize a scrape", run.stderr())
    assert.are.same({ 404, "404 page not found\n" }, { get("/other", "good") })
    assert.are.same({ 405, "only GET and HEAD\n" }, { get("/metrics", "good", "POST") })
    -- its certificate: made at the start for localhost, the serial it says
    local _, cert = proc.sh(("openssl s_client -connect 127.0.0.1:%d </dev/null 2>/dev/null"
      .. " | openssl x509 -noout -subject -serial -ext subjectAltName"):format(port))
    assert.matches("CN ?= ?localhost", cert)
    assert.matches("DNS:localhost", cert)
    assert.are.equal(serial, cert:match("serial=(%x+)"):lower())
  end)
end)
