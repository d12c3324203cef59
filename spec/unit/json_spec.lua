-- luaop.core.json: exact round trips of what Kubernetes sends and accepts.
local json = require("luaop.core").json
local luaop = require "support.luaop"
local proc = require "support.proc"

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

    it("peeks along a path of keys, and decodes a page item by item, leaving out the items that do not decode", function()
      local deep = ('{"a":'):rep(10300) .. "1" .. ("}"):rep(10300)
      local event = '{"type":"ADDED","object":{"metadata":{"annotations":{"name":"not this"},"name":"x","namespace":"n"},"data":'
        .. deep .. "}}"
      assert.is_nil(json.decode(event))
      assert.are.equal("ADDED", json.peek(event, "type"))
      assert.are.same({ annotations = { name = "not this" }, name = "x", namespace = "n" }, json.peek(event, "object", "metadata"))
      assert.are.equal("x", json.peek(event, "object", "metadata", "name"))
      assert.is_nil(json.peek(event, "object", "metadata", "uid"))
      assert.is_nil(json.peek(event, "type", "x")) -- "type" is no object
      local page, skipped = json.decode_page('{"kind":"List","items":[{"n":1},' .. deep .. ',{"n":3}],"metadata":{}}')
      assert.are.equal(2, #page.items)
      assert.are.equal(3, page.items[2].n)
      assert.is_true(json.is_array(page.items))
      assert.are.equal("List", page.kind)
      assert.are.equal(1, #skipped)
      assert.are.equal(2, skipped[1].index)
      assert.matches("nesting deeper than 10240", skipped[1].error)
      assert.are.equal(deep, skipped[1].text)
      local v, err = json.decode_page('{"items":[{"n":1},{"n":2')
      assert.is_nil(v)
      assert.is_string(err)
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

    it("decodes objects as deep as the API server takes (10,000 levels) inside a LIST, and refuses deeper than 10240", function()
      -- Go's encoding/json, and so the API server, stops at 10,000 levels
      local deep = ('{"a":'):rep(9999) .. "1" .. ("}"):rep(9999)
      local list = assert(json.decode('{"kind":"List","items":[' .. deep .. "]}"))
      local v, n = list.items[1], 0
      while type(v) == "table" do v, n = v.a, n + 1 end
      assert.are.equal(9999, n)
      assert.are.equal(1, v)
      local err
      v, err = json.decode(("["):rep(10241) .. ("]"):rep(10241))
      assert.is_nil(v)
      assert.matches("nesting deeper than 10240", err)
      v, err = json.decode(("["):rep(100000))
      assert.is_nil(v)
      assert.matches("nesting deeper than 10240", err)
      assert.is_truthy(json.decode(("["):rep(10240) .. ("]"):rep(10240)))
    end)

    it("decodes and encodes 10,240 levels on a 64 KiB C stack: no recursion on depth", function()
      local path = os.tmpname()
      finally(function() os.remove(path) end)
      local f = assert(io.open(path, "w"))
      f:write([[
        local json = require("luaop.core").json
        local s = ('{"a":'):rep(10240) .. "1" .. ("}"):rep(10240)
        print("same", json.encode(assert(json.decode(s))) == s)
      ]])
      f:close()
      local code, out, err = proc.run { "sh", "-c", ("ulimit -s 64 && exec %s --kubeconfig %s --program %s")
        :format(proc.quote(luaop.bin), proc.quote(luaop.offline()), proc.quote(path)) }
      assert.are.equal(0, code, err)
      assert.matches("same\ttrue", out)
    end)

    it("survives input cut off after an escape in a string longer than a Lua buffer, at every depth", function()
      -- the shape a watch line cut by a dropped connection has; a decoder
      -- that changed the Lua stack under a live luaL_Buffer corrupted the
      -- heap here (found by fuzzing). In a process of its own: a crash is
      -- a failed exit status, not a dead spec runner.
      local out = luaop.ok([[
        local json = require("luaop.core").json
        local failed = 0
        for depth = 1, 64 do
          for len = 1000, 3000, 97 do
            local text = ('{"k":'):rep(depth) .. '"' .. ('a'):rep(len) .. '\\n'
            for _, tail in ipairs { "", "\\", "\\q", "\\u12", "\1" } do
              local v, err = json.decode(text .. tail)
              if v == nil and type(err) == "string" then failed = failed + 1 end
            end
          end
          collectgarbage()
        end
        print("refused", failed)
        print("still decodes", json.decode('{"k":["a\\n",1]}').k[2])
      ]], { offline = true })
      assert.matches("refused\t" .. 64 * 21 * 5, out)
      assert.matches("still decodes\t1", out)
    end)

    it("has a defined, valid JSON for -0.0, 1e400, NaN and the largest and smallest integers", function()
      -- numbers too large for a double are refused, as Go refuses them; too small are 0
      for _, text in ipairs { "1e400", "-1e400", "[1,2e999]" } do
        local v, err = json.decode(text)
        assert.is_nil(v, text)
        assert.matches("number out of range", err)
      end
      assert.are.equal(0.0, json.decode("1e-400"))
      -- -0.0 writes as 0: "-0" would read back as the integer 0 and write as "0"
      assert.are.equal("0", json.encode(-0.0))
      assert.are.equal("float", math.type(json.decode("-0.0")))
      assert.are.equal("0", roundtrip("-0.0"))
      assert.are.equal("0", roundtrip("-0"))
      -- NaN and infinities cannot be written
      assert.has_error(function() json.encode(0 / 0) end, "cannot encode NaN or infinity as JSON")
      assert.has_error(function() json.encode(-math.huge) end, "cannot encode NaN or infinity as JSON")
      -- integers at the ends of 64 bits stay integers; one beyond is a float
      assert.are.equal(math.maxinteger, json.decode(json.encode(math.maxinteger)))
      assert.are.equal(math.mininteger, json.decode(json.encode(math.mininteger)))
      assert.are.equal("float", math.type(json.decode("9223372036854775808")))
      assert.are.equal("float", math.type(json.decode("-9223372036854775809")))
      -- an integral float writes as an integer (6 / 2 is a valid replica count)
      assert.are.equal("3", json.encode(6 / 2))
      -- and every text written reads back to a value that writes the same text
      for _, x in ipairs { -0.0, 0.0, 2^53, 2^63, -2^63, 2^64, 1e15, 1e16, 1e300, -1e-300, 5e-324, 0.1, 1 / 3,
                           math.maxinteger, math.mininteger, math.maxinteger + 0.0, 1.7976931348623157e308 } do
        local once = json.encode(x)
        assert.are.equal(once, json.encode(json.decode(once)), once)
        assert.are.equal(x, json.decode(once), once)
      end
    end)

    it("raises on a non-string argument", function()
      assert.has_error(function() json.decode({}) end)
    end)
  end)

  describe("event", function()
    it("hands a watch event's type, its object decoded and that object's text, metadata.managedFields cut out of both",
      function()
      local line = '{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a",'
        .. '"managedFields":[{"manager":"m","fieldsV1":{"f:data":{".":{}}}}],"namespace":"b","labels":{"x":"y"}},'
        .. '"data":{"managedFields":"kept: not metadata\'s"}}}'
      local typ, obj, text = json.event(line)
      assert.are.equal("MODIFIED", typ)
      assert.are.equal('{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"b","labels":'
        .. '{"x":"y"}},"data":{"managedFields":"kept: not metadata\'s"}}', text)
      assert.are.same(json.decode(text), obj)
      assert.is_nil(obj.metadata.managedFields)
      assert.are.equal("kept: not metadata's", obj.data.managedFields)
      -- the last of a key given twice, as decode takes it; space between
      -- members goes, values are copied as written
      typ, obj, text = json.event('{"object":{"metadata":{"managedFields":1,"managedFields":2,"n":{ }} , '
        .. '"spec" : { "a" : [1, 2] } },"type":"ADDED","type":"DELETED"} ')
      assert.are.equal("DELETED", typ)
      assert.are.equal('{"metadata":{"n":{ }},"spec":{ "a" : [1, 2] }}', text)
      assert.are.same({ metadata = { n = {} }, spec = { a = { 1, 2 } } }, obj)
      -- an object as long as the scratch space, and longer
      for _, n in ipairs { 16000, 16384, 70000 } do
        local big = ('{"metadata":{"name":"n","managedFields":[]},"data":{"a":"%s"}}'):format(("x"):rep(n))
        typ, obj, text = json.event('{"type":"ADDED","object":' .. big .. '}')
        assert.are.equal("ADDED", typ)
        assert.are.equal(n, #obj.data.a)
        assert.are.equal(big:gsub(',"managedFields":%[%]', ""), text)
      end
    end)

    it("hands, shallow, the object's metadata alone beside its whole text (an ERROR's Status whole, uncut)",
      function()
      local line = '{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"a","managedFields":[{"m":1}],'
        .. '"labels":{"x":"y"}},"spec":{"containers":[{"name":"c","n":1.5e3,"t":true,"f":null}]}}}'
      local typ, obj, text = json.event(line, nil, true)
      assert.are.equal("MODIFIED", typ)
      assert.are.same({ metadata = { name = "a", labels = { x = "y" } } }, obj)
      assert.are.equal(select(3, json.event(line)), text)
      assert.are.same({ name = "c", n = 1500.0, t = true, f = json.null }, json.decode(text).spec.containers[1])
      -- the metadata the decoder takes: the last of two; no metadata: the
      -- object whole (which a watch refuses)
      assert.are.same({ metadata = { name = "b" } },
        select(2, json.event('{"type":"ADDED","object":{"metadata":{"name":"a"},"metadata":{"name":"b"}}}', nil, true)))
      assert.are.same({ spec = {} }, select(2, json.event('{"type":"ADDED","object":{"spec":{}}}', nil, true)))
      typ, obj = json.event('{"type":"ERROR","object":{"kind":"Status","code":410,"message":"gone"}}', nil, true)
      assert.are.equal("ERROR", typ)
      assert.are.same({ kind = "Status", code = 410, message = "gone" }, obj)
      -- a trimmed cache's too; an ERROR's Status there uncut (its code,
      -- reason and message say what the watch's end was: a 410 a 410)
      local _, o2, t2 = json.event(line, json.cut { keep = { "spec.none" } }, true)
      assert.are.same({ metadata = { name = "a", labels = { x = "y" } } }, o2)
      assert.are.equal('{"kind":"Pod","metadata":{"name":"a","labels":{"x":"y"}},"spec":{}}', t2)
      local gone = '{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        .. '"message":"too old resource version: 1 (2)","reason":"Expired","code":410}}'
      for _, cut in ipairs { json.cut { keep = { "status.phase" } }, json.cut { drop = { "code", "reason" } } } do
        for _, shallow in ipairs { true, false } do
          typ, obj = json.event(gone, cut, shallow)
          assert.are.equal("ERROR", typ)
          assert.are.same({ kind = "Status", apiVersion = "v1", metadata = {}, status = "Failure",
            message = "too old resource version: 1 (2)", reason = "Expired", code = 410 }, obj)
        end
      end
    end)

    it("hands a LIST page's items shallow beside their texts as a cache keeps them, apiVersion and kind first",
      function()
        local head = '{"apiVersion":"v1","kind":"Pod"'
        local page, texts, skipped, dropped = json.page_texts('{"kind":"PodList","metadata":{"resourceVersion":"7"},'
          .. '"items":[{"metadata":{"name":"a","managedFields":[{"m":1}]},"spec":{"n":1}},{},'
          .. '{"metadata":{"n\\u0061me":"b"},"spec":{}},{"metadata":{"name":"c"},"bad":tru},'
          .. '{"apiVersion":"v2","metadata":{"name":"d"}}]}', nil, head)
        assert.are.same({ kind = "PodList", metadata = { resourceVersion = "7" } },
          { kind = page.kind, metadata = page.metadata })
        assert.are.same({ { metadata = { name = "a" } }, { apiVersion = "v1", kind = "Pod" },
          { metadata = { name = "b" }, spec = {} }, { metadata = { name = "d" } } }, page.items)
        assert.are.same({ '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"n":1}}',
          '{"apiVersion":"v1","kind":"Pod"}', false, '{"apiVersion":"v1","kind":"Pod","apiVersion":"v2","metadata":{"name":"d"}}' },
          texts)
        -- (an item's own apiVersion is the one its text decodes to: the last)
        assert.are.equal("v2", json.decode(texts[4]).apiVersion)
        assert.are.equal(0, dropped)
        -- an item that does not decode is named by the byte of its own text
        assert.are.same({ { index = 4, error = "invalid literal at byte 31", text = '{"metadata":{"name":"c"},"bad":tru}' } },
          skipped)
        -- no head: the texts as the items are; a trimmed cache's cut
        local _, t2 = json.page_texts('{"metadata":{},"items":[{"metadata":{"name":"a"},"spec":{"x":1},"data":2}]}',
          json.cut { drop = { "spec" } })
        assert.are.same({ '{"metadata":{"name":"a"},"data":2}' }, t2)
        -- a page it cannot walk, and a head that is no object's start
        assert.are.same({ nil, "expected a string key in object at byte 1" }, { json.page_texts("{") })
        assert.has_error(function() json.page_texts('{"items":[]}', nil, '"a":1') end)
        -- a head that breaks the JSON only gets the items refused
        local p3, t3, s3 = json.page_texts('{"metadata":{},"items":[{"metadata":{"name":"a"}}]}', nil, '{"a":')
        assert.are.same({ {}, {} }, { p3.items, t3 })
        assert.are.equal(1, #s3)
      end)

    it("cuts what a trimmed cache drops, or all but what it keeps, apiVersion, kind and metadata always kept",
      function()
      local line = json.encode { type = "ADDED", object = { apiVersion = "v1", kind = "Pod",
        metadata = { name = "a", namespace = "b", annotations = { big = "x" }, labels = { l = "v" },
          managedFields = json.array { { manager = "m" } } },
        spec = { nodeName = "n", containers = json.array { { name = "c" } }, template = { a = 1 } },
        status = { phase = "Running", conditions = json.array { 1, 2 } } } }
      local drop = json.cut { drop = { "spec.template", "status.conditions", "metadata.annotations", "nothing.here" } }
      local _, obj, text = json.event(line, drop)
      assert.are.same({ apiVersion = "v1", kind = "Pod", metadata = { name = "a", namespace = "b", labels = { l = "v" } },
        spec = { nodeName = "n", containers = { { name = "c" } } }, status = { phase = "Running" } }, obj)
      assert.are.same(json.decode(text), obj)
      local keep = json.cut { keep = { "spec.nodeName", "status" } }
      _, obj = json.event(line, keep)
      assert.are.same({ apiVersion = "v1", kind = "Pod", metadata = { name = "a", namespace = "b",
        annotations = { big = "x" }, labels = { l = "v" } }, spec = { nodeName = "n" },
        status = { phase = "Running", conditions = { 1, 2 } } }, obj)
      -- a path that ends where another goes on takes the member whole, in
      -- either order; a value that is no object is taken whole
      for _, paths in ipairs { { "a", "a.b" }, { "a.b", "a" } } do
        assert.are.equal('{"d":3}', json.trim('{"a":{"b":1,"c":2},"d":3}', json.cut { drop = paths }))
      end
      assert.are.equal('{"a":{"b":1}}', json.trim('{"a":{"b":1,"c":2},"d":3}', json.cut { keep = { "a.b" } }))
      assert.are.equal('{"a":5}', json.trim(' {"a":5,"d":3} ', json.cut { keep = { "a.b" } }))
      -- a metadata-only cache's: metadata alone (its apiVersion and kind
      -- are always the same)
      assert.are.equal('{"metadata":{"name":"a"}}', json.trim('{"kind":"PartialObjectMetadata","apiVersion":'
        .. '"meta.k8s.io/v1","metadata":{"name":"a","managedFields":[]},"spec":{}}', json.cut { metadata_only = true }))
      assert.has_error(function() json.cut { metadata_only = true, drop = { "a" } } end)
      -- no cut: the cache's own (managedFields out)
      assert.are.equal('{"metadata":{"name":"x"}}', json.trim('{"metadata":{"managedFields":[],"name":"x"}}'))
      assert.are.equal(0, select("#", json.trim("[1]")))
      assert.are.equal(0, select("#", json.trim('{"a":1')))
      for _, bad in ipairs { { keep = { "metadata.labels" } }, { drop = { "metadata" } }, { drop = { "kind" } },
        { drop = { "a..b" } }, { drop = { "" } }, { drop = {} }, { drop = { "a" }, keep = { "b" } }, {},
        { drop = { ("a."):rep(16) .. "b" } }, { drop = { ("x"):rep(254) } }, { keep = { 1 } }, { drop = "a" },
        { drop = { "a\0b" } } } do
        assert.has_error(function() json.cut(bad) end)
      end
      local many = {}
      for i = 1, 65 do many[i] = "p" .. i end
      assert.has_error(function() json.cut { drop = many } end)
      assert.has_error(function() json.event(line, {}) end)
      -- a cut is collected as any value (its __gc frees its tree: ASan's
      -- leak check and valgrind run this too), the largest one too
      for _ = 1, 1000 do json.cut { drop = { "spec.a.b.c", "status" } } end
      local paths = {}
      for i = 1, 64 do paths[i] = (("n%d%s."):format(i, ("x"):rep(200))):rep(16):sub(1, -2) end
      local big = json.cut { drop = paths }
      assert.are.equal('{"a":1}', json.trim('{"a":1}', big))
      collectgarbage()
    end)

    it("hands nothing for a line it does not take so, which decode then says what is wrong with", function()
      for _, line in ipairs {
        '{"type":"ADDED","object":{"metadata":{"managed\\u0046ields":[]}}}', -- escapes: only decode reads it right
        '{"type":"ADD\\u0045D","object":{}}',
        '{"type":"ADDED","object":{"metadata":{}}} x', -- trailing characters
        '{"type":"ADDED","object":{"metadata":{"a":}}}',
        '{"type":"ADDED","object":{"metadata":{"a":[1,2}}}',
        '{"type":"ADDED","object":[]}',
        '{"type":"ADDED","object":null}',
        '{"type":"ADDED"}',
        '{"object":{}}',
        '{"type":1,"object":{}}',
        '{"type":"ADDED","object":{"a":1',
        '{"type":"ADDED","object":{"a":"\\x"}}', -- skipped by the cut, refused by the decoder
        '[]', '', 'null', '{"type":"ADDED","object":{}',
      } do
        assert.are.equal(0, select("#", json.event(line)), line)
        -- shallow, the object is checked whole all the same
        assert.are.equal(0, select("#", json.event(line, nil, true)), line)
      end
      -- (a short \u escape, a leading zero, a trailing comma, a control
      -- character, a number out of range, an escape \x)
      for _, bad in ipairs { '{"spec":{"a":tru}}', '{"spec":{"a":1e999}}', '{"spec":{"a":"\\u12"}}',
        '{"spec":{"a":01}}', '{"spec":{"a":"x"},"b":[1,]}', '{"spec":"a\1b"}', '{"spec":"\\x"}' } do
        local line = '{"type":"MODIFIED","object":{"metadata":{"name":"x"},' .. bad:sub(2) .. '}'
        assert.are.equal(0, select("#", json.event(line, nil, true)), line)
      end
      assert.has_error(function() json.event() end)
      assert.has_error(function() json.event({}) end)
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
