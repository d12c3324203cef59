-- luaop.core.log: zap-style structured lines, levels, and no credentials.
local core = require "luaop.core"
local log, json = core.log, core.json

local function capture(opts, fn)
  local path = os.tmpname()
  opts.path = path
  log.setup(opts)
  fn()
  log.setup { format = "text", level = "info" } -- back to stderr
  local f = assert(io.open(path))
  local lines = {}
  for l in f:lines() do lines[#lines + 1] = l end
  f:close()
  os.remove(path)
  return lines
end

describe("luaop.core.log", function()
  it("writes text lines as time, level, logger, message and sorted key/values", function()
    local lines = capture({ format = "text", level = "info" }, function()
      log.write("info", "controller.at", "Reconcile done", { namespace = "default", name = "a", n = 3, ok = true })
    end)
    assert.are.equal(1, #lines)
    local ts, level, logger, msg, kv = lines[1]:match("^(%S+)\t(%u+)\t(%S+)\t([^\t]+)\t(.*)$")
    assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ$", ts)
    assert.are.equal("INFO", level)
    assert.are.equal("controller.at", logger)
    assert.are.equal("Reconcile done", msg)
    assert.are.equal('{"n": 3, "name": "a", "namespace": "default", "ok": true}', kv)
  end)

  it("writes JSON lines that parse, with tables as nested JSON", function()
    local lines = capture({ format = "json", level = "debug" }, function()
      log.write("debug", "client", "GET", { status = 200, obj = { kind = "Pod", items = json.array() } })
      log.write("error", "", "failed\nbadly", { err = "boom" })
    end)
    assert.are.equal(2, #lines)
    local a = assert(json.decode(lines[1]))
    assert.are.equal("debug", a.level)
    assert.are.equal("client", a.logger)
    assert.are.equal("GET", a.msg)
    assert.are.equal(200, a.status)
    assert.are.equal("Pod", a.obj.kind)
    assert.is_true(json.is_array(a.obj.items))
    local b = assert(json.decode(lines[2]))
    assert.are.equal("error", b.level)
    assert.are.equal("failed\nbadly", b.msg)
    assert.is_nil(b.logger)
  end)

  it("drops lines above the verbosity and always writes errors", function()
    local lines = capture({ format = "text", level = "error" }, function()
      assert.is_false(log.enabled("info"))
      log.write("info", "x", "hidden")
      log.write("error", "x", "shown")
    end)
    assert.are.equal(1, #lines)
    assert.matches("\tERROR\tx\tshown$", lines[1])
    lines = capture({ format = "text", level = 2 }, function()
      assert.is_true(log.enabled(2))
      assert.is_false(log.enabled(3))
      log.write(2, "x", "trace")
      log.write(3, "x", "hidden")
    end)
    assert.are.equal(1, #lines)
  end)

  it("keeps a text message on one line", function()
    local lines = capture({ format = "text" }, function()
      log.write("info", "x", "line one\nINFO forged line")
    end)
    assert.are.equal(1, #lines)
  end)

  it("never writes the value of a credential key, at any verbosity", function()
    local secret = "s3cr3t-value"
    for _, format in ipairs { "text", "json" } do
      local lines = capture({ format = format, level = 10 }, function()
        log.write(10, "auth", "credentials", {
          token = secret, password = secret, Authorization = "Bearer " .. secret,
          ["client-key-data"] = secret, bearerToken = secret, user = "alice",
          config = { users = { { name = "u", user = { token = secret, password = secret } } } },
        })
      end)
      local all = table.concat(lines, "\n")
      assert.is_nil(all:find(secret, 1, true), all)
      assert.matches("alice", all)
      assert.matches("%[redacted%]", all)
    end
  end)

  it("rejects a bad level or format", function()
    assert.has_error(function() log.setup { level = "loud" } end)
    assert.has_error(function() log.setup { format = "xml" } end)
    assert.has_error(function() log.write("loud", "x", "y") end)
  end)
end)
