-- require "cjson": lua-cjson's interface over luaop's exact codec
-- (lua/luaop/cjson.lua), in sandboxed scripts and in programs, and each
-- compatibility promise docs/json.md makes. Debian's lua-cjson itself is
-- not used here (luaop does not depend on it).
local cjson_mod = require "luaop.cjson"
local core_json = require("luaop.core").json
local luaop = require "support.luaop"
local volume = require "support.volume"

local TEXT = '{"a":[],"b":{},"c":9007199254740993,"d":null}'

-- Run source as a sandboxed script's top level, then end it: stdout.
local function probe(source)
  local code, out, err = luaop.run(source .. '\nerror("end of probe", 0)\n', { offline = true, script = true })
  assert.are.equal(1, code, err)
  assert.matches("end of probe", err, 1, true)
  return out
end

describe("require \"cjson\"", function()
  local cjson
  before_each(function() cjson = cjson_mod.new() end)

  it("round-trips {\"a\":[],\"b\":{},\"c\":9007199254740993,\"d\":null} byte for byte in a sandboxed script", function()
    local out = probe(([[
      local cjson = require "cjson"
      local v = cjson.decode(%q)
      print(cjson.encode(v), math.type(v.c), v.d == cjson.null)
    ]]):format(TEXT))
    assert.are.equal(TEXT .. "\tinteger\ttrue\n", out)
  end)

  it("round-trips {\"a\":[],\"b\":{},\"c\":9007199254740993,\"d\":null} byte for byte in a program", function()
    local out = luaop.ok(([[
      local cjson = require "cjson"
      local v = cjson.decode(%q)
      print(cjson.encode(v), math.type(v.c), v.d == cjson.null, require("cjson.safe").decode("["))
      return 0
    ]]):format(TEXT), { offline = true })
    assert.are.equal(TEXT .. "\tinteger\ttrue\tnil\tExpected value but found T_END at character 2\n", out)
  end)

  it("gives luaop.null as cjson.null, and decodes null to it", function()
    assert.are.equal(require("luaop").null, cjson.null)
    assert.are.equal(core_json.null, cjson.null)
    assert.are.equal(cjson.null, cjson.decode("[null]")[1])
    assert.are.equal("null", cjson.encode(cjson.null))
    assert.are.equal("true\n", probe('print(require("cjson").null == require("luaop").null)'))
  end)

  it("encodes cjson.empty_array as [] beside {} for an empty table", function()
    assert.are.equal('{"a":[],"b":{}}', cjson.encode { a = cjson.empty_array, b = {} })
    assert.are.equal("[]", cjson.encode(cjson.new().empty_array))
  end)

  it("has luaop's array metatable as array_mt and empty_array_mt, set by decode and by luaop.array", function()
    assert.are.equal(getmetatable(core_json.array()), cjson.array_mt)
    assert.are.equal(cjson.array_mt, cjson.empty_array_mt)
    assert.are.equal(cjson.array_mt, getmetatable(cjson.decode("[]")))
    assert.are.equal("[]", cjson.encode(setmetatable({}, cjson.empty_array_mt)))
    assert.are.equal('["a","b"]', cjson.encode(setmetatable({ "a", "b" }, cjson.array_mt)))
    -- lua-cjson's array_mt: the array part, as long as #t, holes as null, other keys left out
    local t = setmetatable({ "one", "two", nil, "four", foo = "bar" }, cjson.array_mt)
    assert.are.equal('["one","two",null,"four"]', cjson.encode(t))
  end)

  it("offers array_mt in the sandbox as a read-only stand-in for luaop's array metatable", function()
    local out = probe([[
      local cjson = require "cjson"
      local a = cjson.decode("[]")
      print(getmetatable(a) == cjson.array_mt, getmetatable(require("luaop").array()) == cjson.array_mt,
        cjson.encode(setmetatable({}, cjson.array_mt)), cjson.encode(setmetatable({}, cjson.empty_array_mt)),
        cjson.encode(cjson.empty_array), cjson.encode { a = a, o = {} }, getmetatable(cjson.array_mt))
      print(pcall(function() cjson.array_mt.__index = function() return "hacked" end end))
      print(pcall(rawset, cjson.array_mt, "__index", print))
    ]])
    assert.matches('^true\ttrue\t%[%]\t%[%]\t%[%]\t{"a":%[%],"o":{}}\tfalse\n', out)
    assert.matches("false\t[^\n]*cjson.array_mt is read%-only", out)
    assert.matches("false\ta read%-only table cannot be changed, even with rawset\n", out)
  end)

  it("offers a script exactly lua-cjson's names in cjson and cjson.safe, and no metatable of luaop's", function()
    -- what a script reaches through them, as the sandbox spec walks the rest (P: each module)
    local allowed = [[
P table
P._NAME string
P._VERSION string
P.array_mt table
P.array_mt.__name string
P.array_mt<metatable> boolean
P.decode function
P.decode_allow_comment function
P.decode_array_with_array_mt function
P.decode_invalid_numbers function
P.decode_max_depth function
P.empty_array table
P.empty_array<metatable> table
P.empty_array<metatable>.__name string
P.empty_array<metatable><metatable> boolean
P.empty_array_mt table
P.empty_array_mt.__name string
P.empty_array_mt<metatable> boolean
P.encode function
P.encode_empty_table_as_object function
P.encode_escape_forward_slash function
P.encode_indent function
P.encode_invalid_numbers function
P.encode_keep_buffer function
P.encode_max_depth function
P.encode_number_precision function
P.encode_skip_unsupported_value_types function
P.encode_sparse_array function
P.new function
P.null userdata]]
    local expected = {}
    for _, m in ipairs { "cjson", "cjson.safe" } do
      for line in allowed:gmatch("[^\n]+") do expected[#expected + 1] = (line:gsub("^P", m)) end
    end
    table.sort(expected)
    local out = probe([[
      local paths = {}
      local function walk(v, path)
        paths[#paths + 1] = path .. " " .. type(v)
        if type(v) == "table" then
          for k, x in pairs(v) do walk(x, path .. "." .. tostring(k)) end
        end
        local mt = getmetatable(v)
        if mt ~= nil then walk(mt, path .. "<metatable>") end
      end
      walk(require("cjson"), "cjson")
      walk(require("cjson.safe"), "cjson.safe")
      table.sort(paths)
      print(table.concat(paths, "\n"))
    ]])
    assert.are.equal(table.concat(expected, "\n") .. "\n", out)
  end)

  it("encodes empty tables as {} by default and as [] with encode_empty_table_as_object(false)", function()
    assert.are.equal('{"a":{}}', cjson.encode { a = {} })
    assert.are.equal(false, cjson.encode_empty_table_as_object(false))
    assert.are.equal('{"a":[],"b":{"c":[]},"d":[1]}', cjson.encode { a = {}, b = { c = {} }, d = { 1 } })
    assert.are.equal(true, cjson.encode_empty_table_as_object("on"))
    assert.are.equal('{"a":{}}', cjson.encode { a = {} })
  end)

  it("gives each instance from new() settings of its own", function()
    local other = cjson.new()
    assert.are.equal(5, cjson.encode_max_depth(5))
    assert.are.equal(false, cjson.encode_escape_forward_slash(false))
    assert.are.equal(1000, other.encode_max_depth())
    assert.are.equal(true, other.encode_escape_forward_slash())
    assert.are.equal('"a/b"', cjson.encode("a/b"))
    assert.are.equal('"a\\/b"', other.encode("a/b"))
    assert.are.equal(1000, cjson_mod.new().encode_max_depth())
  end)

  it("has cjson.safe return nil and the error instead of raising, and so do its new() instances", function()
    local safe = cjson_mod.new(nil, true)
    for _, s in ipairs { safe, safe.new() } do
      local v, err = s.decode("[1,")
      assert.is_nil(v)
      assert.are.equal("Expected value but found T_END at character 4", err)
      v, err = s.encode { f = print }
      assert.is_nil(v)
      assert.are.equal("Cannot serialise function: type not supported", err)
      assert.are.equal("[1]", s.encode { 1 })
    end
    -- as lua-cjson's: a wrong number of arguments still raises
    assert.has_error(function() safe.decode() end, "bad argument #1 to 'cjson.safe.decode' (expected 1 argument)")
  end)

  it("returns the current setting from every setter, sets it only when given one, and checks it as lua-cjson does", function()
    local defaults = {
      encode_max_depth = 1000, decode_max_depth = 1000, encode_number_precision = 14, encode_keep_buffer = true,
      encode_empty_table_as_object = true, decode_array_with_array_mt = true, encode_escape_forward_slash = true,
      encode_skip_unsupported_value_types = false, encode_invalid_numbers = false, decode_invalid_numbers = false,
      decode_allow_comment = false, encode_indent = "",
    }
    for name, v in pairs(defaults) do assert.are.equal(v, cjson[name](), name) end
    assert.are.same({ false, 2, 10 }, { cjson.encode_sparse_array() })
    assert.are.equal(7, cjson.encode_max_depth(7))
    assert.are.equal(7, cjson.encode_max_depth())
    assert.are.equal(16, cjson.encode_number_precision(16))
    assert.are.equal(false, cjson.encode_keep_buffer("off"))
    assert.are.equal("null", cjson.encode_invalid_numbers("null"))
    assert.are.same({ true, 3, 20 }, { cjson.encode_sparse_array(true, 3, 20) })
    assert.are.same({ true, 0, 20 }, { cjson.encode_sparse_array(nil, 0) })
    assert.has_error(function() cjson.encode_max_depth(0) end,
      "bad argument #1 to 'cjson.encode_max_depth' (expected integer between 1 and 2147483647)")
    assert.has_error(function() cjson.encode_number_precision(17) end,
      "bad argument #1 to 'cjson.encode_number_precision' (expected integer between 1 and 16)")
    assert.has_error(function() cjson.decode_max_depth(1, 2) end,
      "bad argument #2 to 'cjson.decode_max_depth' (found too many arguments)")
    assert.has_error(function() cjson.encode_keep_buffer("maybe") end,
      "bad argument #1 to 'cjson.encode_keep_buffer' (invalid option 'maybe')")
    assert.has_error(function() cjson.encode() end, "bad argument #1 to 'cjson.encode' (expected 1 argument)")
    assert.are.equal(7, cjson.encode_max_depth())
  end)

  it("keeps one script's cjson settings and changes from every other script", function()
    local v = volume.new { ["a.lua"] = [=[
      local cjson, safe = require "cjson", require "cjson.safe"
      cjson.encode_escape_forward_slash(false)
      cjson.encode_max_depth(1)
      cjson.decode_array_with_array_mt(false)
      cjson.encode_empty_table_as_object(false)
      safe.decode_max_depth(1)
      cjson.decode = function() return "a's" end
      cjson.mine = true
      print("a", cjson.encode({ "a/b" }), cjson.encode({}), require("cjson") == cjson)
      return require("luaop").controller { name = "a", resource = "v1/ConfigMap", namespace = "x", reconcile = function() end }
    ]=], ["b.lua"] = [=[
      local cjson, safe = require "cjson", require "cjson.safe"
      print("b", cjson.encode("a/b"), cjson.encode_max_depth(), cjson.decode_array_with_array_mt(),
        cjson.encode({}), cjson.encode(cjson.decode("[[]]")), safe.decode_max_depth(), tostring(cjson.mine))
      error("end of probe", 0)
    ]=] }
    finally(function() v:remove() end)
    local code, out, err = luaop.run(nil, { offline = true, flags = { "--script", v.dir } })
    assert.are.equal(1, code, err)
    assert.matches("end of probe", err, 1, true)
    assert.matches('a\t["a/b"]\t[]\ttrue\n', out, 1, true)
    assert.matches('b\t"a\\/b"\t1000\ttrue\t{}\t[[]]\t1000\tnil\n', out, 1, true)
  end)

  it("encodes what lua-cjson encodes and the codec alone refuses: sparse arrays, number keys, NaN as null, skipped values", function()
    assert.are.equal('[null,null,"data"]', cjson.encode { [3] = "data" })
    assert.has_error(function() cjson.encode { [1000] = "x" } end, "Cannot serialise table: excessively sparse array")
    cjson.encode_sparse_array(true)
    assert.are.equal('{"1000":"x"}', cjson.encode { [1000] = "x" })
    assert.are.equal('{"1":1,"2":2,"a":3}', cjson.encode { 1, 2, a = 3 })
    assert.has_error(function() cjson.encode { 0 / 0 } end, "Cannot serialise number: must not be NaN or Infinity")
    cjson.encode_invalid_numbers("null")
    assert.are.equal("[null,null,1.5]", cjson.encode { 0 / 0, math.huge, 1.5 })
    assert.has_error(function() cjson.encode { print } end, "Cannot serialise function: type not supported")
    assert.has_error(function() cjson.encode { [true] = 1 } end,
      "Cannot serialise boolean: table key must be a number or string")
    cjson.encode_skip_unsupported_value_types(true)
    assert.are.equal('[1,2]', cjson.encode { 1, print, 2 })
    assert.are.equal('{"b":1}', cjson.encode { a = print, b = 1 })
  end)

  it("escapes / by default as lua-cjson does, and writes luaop's own text without", function()
    local obj = { apiVersion = "apps/v1", kind = "Deployment" }
    assert.are.equal('{"apiVersion":"apps\\/v1","kind":"Deployment"}', cjson.encode(obj))
    cjson.encode_escape_forward_slash(false)
    assert.are.equal(core_json.encode(obj), cjson.encode(obj))
    assert.are.equal("apps/v1", cjson.decode('"apps\\/v1"'))
  end)

  it("refuses the settings luaop cannot honour: invalid numbers, comments, indentation", function()
    local no = "Infinity, NaN, and/or hexadecimal numbers are not supported."
    assert.has_error(function() cjson.encode_invalid_numbers(true) end, no)
    assert.has_error(function() cjson.decode_invalid_numbers(true) end, no)
    assert.has_error(function() cjson.decode_allow_comment(true) end, "comments are not JSON: luaop decodes strict JSON only")
    assert.has_error(function() cjson.encode_indent("  ") end,
      "luaop's cjson writes compact JSON only: encode_indent takes \"\"")
    assert.are.equal(false, cjson.encode_invalid_numbers())
    assert.are.equal(false, cjson.decode_invalid_numbers(false))
    assert.has_error(function() cjson.decode("NaN") end)
  end)

  it("words decode errors as lua-cjson does, naming the character", function()
    for text, msg in pairs {
      ["[1,"] = "Expected value but found T_END at character 4",
      ["x"] = "Expected value but found invalid token at character 1",
      ['{"a" 1}'] = "Expected colon but found T_NUMBER at character 6",
      ["[1 2]"] = "Expected comma or array end but found T_NUMBER at character 4",
      ["[1] x"] = "Expected the end but found invalid token at character 5",
      ["{1:2}"] = "Expected object key string but found T_NUMBER at character 2",
      ["[1,]"] = "Expected value but found T_ARR_END at character 4",
    } do
      assert.has_error(function() cjson.decode(text) end, msg)
    end
  end)

  it("limits nesting as lua-cjson does: 1000 levels by default, a cycle fails, a limit of one's own", function()
    local deep = ("["):rep(1001) .. ("]"):rep(1001)
    assert.has_error(function() cjson.decode(deep) end, "Found too many nested data structures (1001) at character 1001")
    assert.are.equal(deep:sub(2, -2), cjson.encode(cjson.decode(deep:sub(2, -2))))
    local cycle = {}
    cycle[1] = cycle
    assert.has_error(function() cjson.encode(cycle) end, "Cannot serialise, excessive nesting (1001)")
    cjson.encode_max_depth(2)
    cjson.decode_max_depth(2)
    assert.are.equal("[[1]]", cjson.encode { { 1 } })
    assert.has_error(function() cjson.encode { { { 1 } } } end, "Cannot serialise, excessive nesting (3)")
    assert.has_error(function() cjson.decode("[[[1]]]") end, "Found too many nested data structures (3) at character 3")
  end)

  it("decodes arrays as plain tables with decode_array_with_array_mt(false), as lua-cjson does by default", function()
    assert.are.equal(false, cjson.decode_array_with_array_mt(false))
    local v = cjson.decode('{"a":[[]],"b":[1]}')
    assert.is_nil(getmetatable(v.a))
    assert.is_nil(getmetatable(v.a[1]))
    assert.are.equal('{"a":[{}],"b":[1]}', cjson.encode(v))
  end)
end)
