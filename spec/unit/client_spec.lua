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
end)
