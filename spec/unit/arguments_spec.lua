-- Misuse of ctx's and the client's methods raises at the script's line,
-- naming the call and what was wrong with what it was given: never a
-- NotFound from the API server, never a line of luaop's own. Each case runs
-- in a reconcile in the kit, as a script would call it.
local testing = require "luaop.testing"
local kit = require "support.kit"

-- { call, what its message says after "file:line: " }
local CASES = {
  { 'ctx:get("ConfigMap", nil)', "ctx:get(kind, name_or_req [, namespace]): name_or_req must be a name or a request "
    .. "{namespace =, name =}, got nil" },
  { 'ctx:get("Namespace", nil)', "ctx:get(kind, name_or_req [, namespace]): name_or_req must be a name" },
  { 'ctx:get("ConfigMap", "")', 'name_or_req must be a name or a request {namespace =, name =}, got the string ""' },
  { 'ctx:get("ConfigMap", 42)', "name_or_req must be a name or a request {namespace =, name =}, got the number 42" },
  { 'ctx:get("ConfigMap", { name = 42 })', "the request's name must be a non-empty string, got the number 42" },
  { 'ctx:get("ConfigMap", { nmae = "x", namespace = "default" })',
    "ctx:get(kind, name_or_req [, namespace]): the request has an unknown field nmae (did you mean name?)" },
  { 'ctx:get("ConfigMap", { name = "x", namespace = "default", extra = 1 })',
    "the request has an unknown field extra (a request is {namespace =, name =})" },
  { 'ctx:get("ConfigMap", "x", 7)', "namespace must be a string, got the number 7" },
  { 'ctx:get(nil, "x")', 'kind must be a string such as "v1/ConfigMap", got nil' },
  { 'ctx:list("ConfigMap", { namespcae = "x" })', "ctx:list(kind [, opts]): unknown option namespcae "
    .. "(did you mean namespace?)" },
  { 'ctx:list("ConfigMap", { labels = "a=b" })', "opts.labels must be a table (a selector string" },
  { 'ctx:create(nil)', "ctx:create(obj [, opts]): obj must be an object (a table), got nil" },
  { 'ctx:create({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = 5 } })',
    "ctx:create(obj [, opts]): obj.metadata.name must be a string, got the number 5" },
  { 'ctx:create({ apiVersion = "v1", kind = "ConfigMap", metadata = { generateName = true } })',
    "obj.metadata.generateName must be a string, got the boolean true" },
  { 'ctx:update({ apiVersion = "v1", kind = "ConfigMap", metadata = {} })',
    "ctx:update(obj [, opts]): obj.metadata.name must be the name of the object to write, got nil" },
  { 'ctx:update_status({ apiVersion = "v1", kind = "ConfigMap" })',
    "ctx:update_status(obj [, opts]): obj.metadata.name must be the name of the object to write, got nil" },
  { 'ctx:apply({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "x", namespace = 5 } })',
    "ctx:apply(obj [, opts]): obj.metadata.namespace must be a string, got the number 5" },
  { 'ctx:delete("ConfigMap", { nmae = "x" })', "ctx:delete(kind, name_or_req [, namespace] [, opts]): the request "
    .. "has an unknown field nmae (did you mean name?)" },
  { 'ctx:patch("ConfigMap", nil, {})', "ctx:patch(kind, name_or_req [, namespace], patch [, opts]): name_or_req must" },
  { 'luaop.client():get("ConfigMap", nil)', "client:get(kind, name_or_req [, namespace]): name_or_req must be a name" },
  { 'luaop.client():get("ConfigMap", { name = "x", nmespace = "y" })',
    "client:get(kind, name_or_req [, namespace]): the request has an unknown field nmespace (did you mean namespace?)" },
  { 'luaop.client():delete("ConfigMap", {})', "client:delete(kind, name_or_req [, opts]): the request's name must be" },
  { 'luaop.client():patch("ConfigMap", 5, {})', "client:patch(kind, name_or_req, patch [, opts]): name_or_req must" },
}

describe("misuse of ctx's and the client's methods", function()
  local t = kit.per_test(before_each, after_each)

  it("raises at the script's line, naming the call and what it was given, never NotFound or a line of luaop's", function()
    local lines = { 'local luaop = require "luaop"', "local CASES = {" }
    for i, c in ipairs(CASES) do
      lines[#lines + 1] = ("  [%d] = function(ctx) local r, e = %s return r, e end,"):format(i, c[1])
    end
    lines[#lines + 1] = "}"
    lines[#lines + 1] = [[
return luaop.controller {
  name = "misuse", resource = "v1/ConfigMap", namespace = "default",
  reconcile = function(ctx, req)
    if req.name ~= "go" then return end
    local cm = assert(ctx:get("ConfigMap", req))
    cm.data = {}
    for i, f in ipairs(CASES) do
      local ok, err = pcall(f, ctx)
      cm.data[tostring(i)] = ok and "no error" or tostring(err)
    end
    assert(ctx:update(cm))
  end,
}]]
    local path = t.dir .. "/misuse.lua"
    local f = assert(io.open(path, "w"))
    f:write(table.concat(lines, "\n"))
    f:close()
    t.env = testing.env { script = path }
    assert(t.env:create(kit.cm("go")))
    local data = t.env:get("ConfigMap", "go").data
    for i, c in ipairs(CASES) do
      local got = data[tostring(i)]
      local where = ("misuse.lua:%d: "):format(i + 2)
      assert.is_truthy(got:find(where, 1, true), c[1] .. " raised at another line: " .. got)
      assert.is_truthy(got:find(c[2], 1, true), c[1] .. ": " .. got)
      assert.is_nil(got:find("lua/luaop/", 1, true), got)
    end
  end)
end)
