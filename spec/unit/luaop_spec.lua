-- luaop (lua/luaop/init.lua), the module scripts require: only a face. Each
-- of its names is what the module holding it gives, so scripts and
-- luaop's own modules always run the same code, and nothing is added to
-- the face by accident.
local core = require "luaop.core"
local face = require "luaop"
local client = require "luaop.client"
local definition = require "luaop.definition"
local logging = require "luaop.logging"
local object = require "luaop.object"

describe("luaop", function()
  it("holds exactly the names scripts are told of", function()
    local names = {}
    for k in pairs(face) do names[#names + 1] = k end
    table.sort(names)
    assert.are.same({ "array", "client", "conditions", "controller", "controller_of", "copy", "hash", "is_error", "json",
      "log", "logger", "metrics", "null", "requeue", "requeue_after", "set_controller", "sleep", "spawn", "terminal", "time",
      "version", "webhook" }, names)
  end)

  it("gives each name from the module that holds it", function()
    assert.are.equal(definition.define, face.controller)
    assert.are.equal(definition.requeue, face.requeue)
    assert.are.equal(definition.requeue_after, face.requeue_after)
    assert.are.equal(require("luaop.retry").terminal, face.terminal)
    assert.are.equal(object.copy, face.copy)
    assert.are.equal(object.controller_of, face.controller_of)
    assert.are.equal(object.set_controller, face.set_controller)
    assert.are.equal(require "luaop.time", face.time)
    assert.are.equal(require "luaop.conditions", face.conditions)
    assert.are.equal(require("luaop.webhook.definition").face, face.webhook)
    -- (luaop.metrics: the program's own face; each script's is made for it by script/sandbox.lua)
    assert.are.same({ "counter", "gauge", "histogram" }, (function()
      local k = {}
      for n, f in pairs(face.metrics) do k[#k + 1] = n .. (type(f) == "function" and "" or "?") end
      table.sort(k)
      return k
    end)())
    assert.are.equal(logging.logger, face.logger)
    assert.are.equal(client.is_error, face.is_error)
    assert.are.equal(core.json, face.json)
    assert.are.equal(core.json.null, face.null)
    assert.are.equal(core.json.hash, face.hash)
    assert.are.equal(core.json.array, face.array)
    assert.are.equal(core.task.sleep, face.sleep)
    assert.are.equal(core.task.spawn, face.spawn)
    assert.are.equal(core.version, face.version)
    assert.are.equal("script", face.log.name)
  end)

  it("is required by none of luaop's own modules (they require what they use directly)", function()
    local find = assert(io.popen("grep -rlE 'require[ (]*[\"'\"'\"']luaop[\"'\"'\"']' lua | sort"))
    local found = {}
    for path in find:lines() do found[#found + 1] = path end
    find:close()
    -- the sandbox hands the face to scripts, and --check asks the sandbox
    -- for it (as scripts get it); nothing else of lua/ requires it
    assert.are.same({ "lua/luaop/check/uses.lua", "lua/luaop/script/sandbox.lua" }, found)
  end)
end)
