-- luaop.client's error mapping: what a script sees when the API server (or
-- the way to it) says no.
local client = require "luaop.client"
local json = require("luaop.core").json

local function status(code, reason, message, details)
  return json.encode { kind = "Status", apiVersion = "v1", status = "Failure", code = code,
                       reason = reason, message = message, details = details }
end

describe("luaop.client errors", function()
  it("keep the reason and message of a Status", function()
    local err = client.error(404, status(404, "NotFound", 'configmaps "x" not found'))
    assert.are.equal(404, err.code)
    assert.are.equal("NotFound", err.reason)
    assert.are.equal('configmaps "x" not found', err.message)
    assert.are.equal('NotFound (404): configmaps "x" not found', tostring(err))
    assert.is_true(client.is_error(err))
  end)

  it("keep a Status's details, such as the causes of Invalid", function()
    local err = client.error(422, status(422, "Invalid", "bad", { causes = { { field = "spec.schedule" } } }))
    assert.are.equal("Invalid", err.reason)
    assert.are.equal("spec.schedule", err.details.causes[1].field)
  end)

  it("name the reason from the HTTP status when the body says none", function()
    for code, reason in pairs { [400] = "BadRequest", [401] = "Unauthorized", [403] = "Forbidden",
                                [404] = "NotFound", [409] = "Conflict", [410] = "Gone", [422] = "Invalid",
                                [429] = "TooManyRequests", [500] = "InternalError", [503] = "ServiceUnavailable",
                                [502] = "InternalError", [418] = "Unknown" } do
      local err = client.error(code, "")
      assert.are.equal(reason, err.reason, code)
      assert.are.equal(("the server answered HTTP %d"):format(code), err.message)
    end
    assert.are.equal("InternalError", client.error(500, "<html>oops</html>").reason)
  end)

  it("call a failure to get any answer a TransportError, or a Timeout", function()
    local err = client.error(0, "Failed to connect to 127.0.0.1 port 1: Connection refused")
    assert.are.equal(0, err.code)
    assert.are.equal("TransportError", err.reason)
    assert.matches("Connection refused", err.message)
    assert.are.equal("Timeout", client.error(0, "Operation timed out after 300 milliseconds").reason)
  end)

  -- (each call on a line of its own: its function's line is the call's)
  it("raise a malformed kind at the caller's line, before asking the server anything", function()
    local c = setmetatable({ namespace = "default" }, client) -- (no transport: nothing may be sent)
    local cases = {
      { function() local _ = c:get("apps/v1/Deployments/x", "x") end, 'client:get%(kind, name_or_req %[, namespace%]%): '
        .. 'kind must be Kind, version/Kind or group/version/Kind %(.-%), got the string "apps/v1/Deployments/x" %(4 parts%)' },
      { function() local _ = c:list("v1/") end, 'client:list%(kind %[, opts%]%): kind must be .-, got the string "v1/" '
        .. "%(an empty part%)" },
      { function() local _ = c:get(42, "x") end,
        'client:get%(kind, name_or_req %[, namespace%]%): kind must be a string such as "v1/ConfigMap", got the number 42' },
      { function() local _ = c:watch("") end, 'client:watch%(kind %[, opts%]%): kind must be .-, got the string "" %(empty%)' },
      { function() local _ = c:resolve("a b") end,
        'client:resolve%(kind%): kind must be .-, got the string "a b" %("a b" is not a kind\'s name%)' },
      { function() local _ = c:create({ apiVersion = "v1/", kind = "ConfigMap" }) end, "client:create%(obj %[, opts%]%): "
        .. 'obj.apiVersion and obj.kind must make .-, got apiVersion "v1/" and kind "ConfigMap" %(an empty part%)' },
      { function() local _ = c:update_status({ apiVersion = "v1" }) end, "client:update_status%(obj %[, opts%]%): "
        .. "obj.kind must be a string such as \"ConfigMap\", got nil" },
    }
    for _, case in ipairs(cases) do
      local ok, err = pcall(case[1])
      assert.is_false(ok)
      local line = debug.getinfo(case[1], "S").linedefined
      assert.matches("^[^:]*client_spec%.lua:" .. line .. ": " .. case[2] .. "$", err)
    end
  end)
end)
