-- luaop.core.json: exact round trips of what Kubernetes sends and accepts.
local json = require("luaop.core").json

local function roundtrip(s)
  return json.encode(assert(json.decode(s)))
end

describe("luaop.core.json", function()
  describe("decode", function()
    it("keeps {} an object and [] an array", function()
      local v = assert(json.decode('{"o":{},"a":[]}'))
      assert.is_false(json.is_array(v.o))
      assert.is_true(json.is_array(v.a))
      assert.are.equal('{"o":{}}', json.encode { o = v.o })
      assert.are.equal('{"a":[]}', json.encode { a = v.a })
    end)

    it("decodes integers as Lua integers, beyond 2^53 too", function()
      local v = assert(json.decode('[9223372036854775807,-9223372036854775808,9007199254740993,0,-1]'))
      assert.are.equal(math.maxinteger, v[1])
      assert.are.equal(math.mininteger, v[2])
      assert.are.equal(9007199254740993, v[3])
      assert.are.equal("integer", math.type(v[3]))
      assert.are.equal("integer", math.type(v[4]))
      assert.are.equal('[9223372036854775807,-9223372036854775808,9007199254740993,0,-1]',
        roundtrip('[9223372036854775807,-9223372036854775808,9007199254740993,0,-1]'))
    end)

    it("decodes fractions and exponents as floats, and huge integers as floats", function()
      local v = assert(json.decode('[1.5,-2e3,1E-2,123456789012345678901234567890]'))
      assert.are.equal("float", math.type(v[1]))
      assert.are.equal(1.5, v[1])
      assert.are.equal(-2000.0, v[2])
      assert.are.equal(0.01, v[3])
      assert.are.equal("float", math.type(v[4]))
    end)

    it("tells null from absent", function()
      local v = assert(json.decode('{"a":null}'))
      assert.are.equal(json.null, v.a)
      assert.is_nil(v.b)
      assert.are.equal('{"a":null}', json.encode(v))
      local arr = assert(json.decode('[null,1]'))
      assert.are.equal(json.null, arr[1])
      assert.are.equal(2, #arr)
    end)

    it("decodes escapes, \\u sequences and surrogate pairs to UTF-8", function()
      local v = assert(json.decode([["a\"b\\c\/d\n\t\r\b\f \u00e9 \u20ac \ud83d\ude00 \u0000"]]))
      assert.are.equal('a"b\\c/d\n\t\r\b\f é € 😀 \0', v)
    end)

    it("peeks at one member of an object, skipping the others undecoded", function()
      local page = [[{"apiVersion":"v1","items":[{"metadata":{"name":"a","annotations":
        {"x":"}]\\\"","continue":"not this one"}},"data":[1,[2,{"3":null}],true,-4.5e3]}],
        "kind":"List","metadata":{"continue":"abc","resourceVersion":"12"}}]]
      assert.are.same({ ["continue"] = "abc", resourceVersion = "12" }, json.peek(page, "metadata"))
      assert.are.equal("List", json.peek(page, "kind"))
      assert.are.equal(1, #json.peek(page, "items"))
      assert.is_nil(json.peek(page, "nothing"))
      assert.is_nil(json.peek("{}", "metadata"))
      assert.are.equal(2, json.peek(' { "n" : 1 , "m":2 } ', "m"))
      for input, want in pairs {
        ['[1]'] = "expected an object",
        ['{"a":"b'] = "unterminated string",
        ['{"a":]}'] = "unexpected ']'",
        ['{"a":[1,2'] = "unexpected end of input",
        ['{"a":1 "b":2}'] = "expected ',' or '}'",
      } do
        local v, err = json.peek(input, "z")
        assert.is_nil(v, input)
        assert.is_truthy(err and err:find(want, 1, true), ("%q: %s"):format(input, err))
      end
    end)

    it("passes raw UTF-8 through", function()
      assert.are.equal("한국어 日本語", json.decode('"한국어 日本語"'))
    end)

    it("returns nil and a message naming the byte offset on malformed input", function()
      for input, want in pairs {
        ['{"a":1'] = "at byte 6",
        ['{"a" 1}'] = "expected ':'",
        ['[1,]'] = "at byte 3",
        ['"abc'] = "unterminated string",
        ['tru'] = "invalid literal",
        ['01'] = "leading zero",
        ['1 2'] = "trailing characters",
        ['"\\x"'] = "invalid escape",
        ['"\\u12g4"'] = "invalid \\u escape",
        ['"a\nb"'] = "control character",
        [''] = "unexpected end of input",
        ['{1:2}'] = "expected a string key",
      } do
        local v, err = json.decode(input)
        assert.is_nil(v, input)
        assert.is_string(err, input)
        assert.is_truthy(err:find(want, 1, true), ("%q: %s"):format(input, err))
      end
    end)

    it("refuses nesting deeper than its limit instead of overflowing the C stack", function()
      local v, err = json.decode(string.rep("[", 100000))
      assert.is_nil(v)
      assert.matches("nesting deeper than", err)
      assert.is_truthy(json.decode(string.rep("[", 500) .. string.rep("]", 500)))
    end)

    it("raises on a non-string argument", function()
      assert.has_error(function() json.decode({}) end)
    end)
  end)

  describe("encode", function()
    it("encodes a sequence as an array and a string-keyed table as an object", function()
      assert.are.equal('[1,"two",true,false]', json.encode { 1, "two", true, false })
      assert.are.equal('{"k":"v"}', json.encode { k = "v" })
    end)

    it("encodes an empty table as {} unless marked with json.array", function()
      assert.are.equal("{}", json.encode {})
      assert.are.equal("[]", json.encode(json.array()))
      local t = json.array { 1 }
      table.remove(t)
      assert.are.equal("[]", json.encode(t))
    end)

    it("escapes quotes, backslashes and control characters", function()
      assert.are.equal([["a\"b\\c\n\u0001\u007f"]], json.encode('a"b\\c\n\1\127'))
    end)

    it("writes floats so they read back exactly", function()
      for _, x in ipairs { 0.1, 1 / 3, 1e300, -2.5, 3.0 } do
        assert.are.equal(x, json.decode(json.encode(x)))
      end
    end)

    it("raises on values JSON cannot hold", function()
      assert.has_error(function() json.encode { 1, 2, nil, 4 } end)
      assert.has_error(function() json.encode { 1, a = 2 } end, "cannot encode a table mixing string and integer keys as JSON")
      assert.has_error(function() json.encode { [1.5] = 1 } end)
      assert.has_error(function() json.encode(0 / 0) end, "cannot encode NaN or infinity as JSON")
      assert.has_error(function() json.encode(math.huge) end)
      assert.has_error(function() json.encode(print) end, "cannot encode function as JSON")
      local cyclic = {}
      cyclic.self = cyclic
      assert.has_error(function() json.encode(cyclic) end)
    end)

    it("round-trips a Kubernetes object and writes equal objects as equal strings", function()
      local pod = [[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{},"finalizers":[],
        "resourceVersion":"12345","generation":9007199254740993,"annotations":{"a":""}},
        "spec":{"containers":[{"name":"c","image":"busybox","args":[],"env":[{"name":"X","value":null}]}]}}]]
      local once = roundtrip(pod)
      assert.are.equal(once, roundtrip(once))
      -- Members in key order, as Go writes them.
      assert.matches('^{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"a":""},"finalizers":%[%],', once)
      local v = json.decode(once)
      assert.is_true(json.is_array(v.metadata.finalizers))
      assert.is_false(json.is_array(v.metadata.labels))
      assert.is_true(json.is_array(v.spec.containers[1].args))
      assert.are.equal(json.null, v.spec.containers[1].env[1].value)
      assert.are.equal(9007199254740993, v.metadata.generation)
    end)
  end)
end)
