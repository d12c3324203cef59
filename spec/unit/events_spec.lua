-- What luaop.events keeps is owned by the controller that records: its
-- keys (series), its buckets and a heap of when each is next due, capped,
-- forgotten when it stops; a record's work never grows with what other
-- controllers recorded. The API server and the clock are stand-ins here:
-- core.api.request answers at once, core.task.now is the spec's clock.
require "support.luaop"
local core = require "luaop.core"
local events = require "luaop.events"

local function obj(i)
  return { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "o" .. i, namespace = "default", uid = "u" .. i } }
end

local function record(controller, i, reason)
  assert(events.record { regarding = obj(i), type = "Normal", reason = reason or "Seen", controller = controller })
end

-- The instructions f runs (in this thread: the writes' tasks are others).
local function cost(f)
  local n = 0
  debug.sethook(function() n = n + 1 end, "", 1)
  f()
  debug.sethook()
  return n
end

describe("Events' state", function()
  local saved, sent, clock, missing
  local defaults = {}
  before_each(function()
    for _, k in ipairs { "CONTROLLER_BURST", "MAX_KEYS", "SCRIPT_KEYS" } do defaults[k] = events[k] end
    events.reset()
    saved = { request = core.api.request, now = core.task.now }
    sent, clock, missing = {}, 1000, false
    core.api.request = function(r)
      sent[#sent + 1] = r.method .. (r.method ~= "GET" and " " .. r.body or "")
      if r.method == "PATCH" and missing then return 404, '{"kind":"Status","code":404,"reason":"NotFound"}' end
      return r.method == "POST" and 201 or 200, "{}"
    end
    core.task.now = function() return clock end
  end)
  after_each(function()
    core.api.request, core.task.now = saved.request, saved.now
    for k, v in pairs(defaults) do events[k] = v end
    events.reset()
  end)

  it("costs a record the same whatever other controllers keep: its work does not grow with their keys", function()
    events.CONTROLLER_BURST = 1e9
    for i = 1, 100 do record("a", i) end
    local small = cost(function() record("b", 1) end)
    for i = 101, 1000 do record("a", i) end
    local large = cost(function() record("b", 2) end)
    assert.is_true(large <= small + 20, ("a record of b after a's 100 keys: %d instructions, after its 1,000: %d")
      :format(small, large))
    -- a's keys all come due: b's records look at none of them
    clock = clock + 7 * 60
    local _, before = events.stats("b")
    record("b", 3)
    local _, after = events.stats("b")
    assert.is_true(after - before <= events.SWEEP)
    assert.are.equal(1000, events.stats("a").keys)
    -- a's own records sweep its own, a bounded number at a time
    _, before = events.stats("a")
    record("a", 1001)
    _, after = events.stats("a")
    assert.are.equal(events.SWEEP, after - before)
  end)

  it("lets an object start 25 Events, then one every 5 minutes, and a controller 100, then one a second, as "
    .. "client-go's spam filter, whatever the time idle", function()
    assert.are.same({ 25, 300, 100, 1 }, { events.BURST, events.REFILL, events.CONTROLLER_BURST,
      events.CONTROLLER_REFILL })
    -- one object: 25 Events of new keys, the 26th dropped
    for r = 1, 26 do record("a", 1, "Reason" .. r) end
    assert.are.equal(25, #sent)
    -- 299 s later still none; at 300 s one, and one only
    clock = clock + 299
    record("a", 1, "Later1")
    assert.are.equal(25, #sent)
    clock = clock + 1
    record("a", 1, "Later2")
    record("a", 1, "Later3")
    assert.are.equal(26, #sent)
    -- a day idle gives back the burst, not more
    clock = clock + 86400
    for r = 1, 30 do record("a", 1, "Day" .. r) end
    assert.are.equal(51, #sent)
    -- a controller: 100 Events of new objects, then one a second
    for i = 1, 101 do record("b", 100 + i) end
    assert.are.equal(151, #sent)
    clock = clock + 1
    record("b", 300)
    record("b", 301)
    assert.are.equal(152, #sent)
  end)

  it("keeps each controller's keys and buckets apart, capped (its script's together too), and forgets them when "
    .. "it stops", function()
    events.CONTROLLER_BURST, events.MAX_KEYS = 1e9, 50
    for i = 1, 80 do record("a", i) end
    assert.are.equal(50, events.stats("a").keys)
    assert.are.equal(50, #sent) -- the 30 beyond its cap were dropped
    -- a's cap and a's use of an object's bucket are no concern of b's
    for r = 1, 30 do record("a", 1, "Reason" .. r) end -- o1's bucket of a: 25, then empty
    local n = #sent
    record("b", 1, "Reason1")
    assert.are.equal(n + 1, #sent)
    assert.are.equal(1, events.stats("b").keys)
    -- a stops: its series' last counts are written, then it is forgotten
    record("b", 1, "Reason1")
    record("b", 1, "Reason1") -- count 3, 2 written
    n = #sent
    events.forget("b")
    assert.is_nil(events.stats("b"))
    assert.are.equal(n + 1, #sent)
    assert.matches('"count":3', sent[#sent], 1, true)
    events.forget("a")
    assert.is_nil(events.stats("a"))
    -- a reconcile of a stopped controller, still running: its Event is
    -- written, and nothing is kept for it again (forget has run)
    n = #sent
    assert(events.record { regarding = obj(1), type = "Normal", reason = "Late", controller = "a", stopped = true })
    assert.are.equal(n + 1, #sent)
    assert.is_nil(events.stats("a"))
    -- the controllers of one script together: at most SCRIPT_KEYS
    events.SCRIPT_KEYS = 60
    for c = 1, 3 do
      for i = 1, 40 do
        assert(events.record { regarding = obj(i), type = "Normal", reason = "Seen", controller = "s" .. c,
          script = "s.lua" })
      end
    end
    assert.are.same({ 40, 20 }, { events.stats("s1").keys, events.stats("s2").keys })
    assert.are.equal(0, events.stats("s3").keys)
    assert.are.equal(60, select(3, events.stats("s1", "s.lua")).keys)
    record("other", 1) -- another script's controller is no concern of s.lua's cap
    assert.are.equal(1, events.stats("other").keys)
    events.forget("s1")
    assert.are.equal(20, select(3, events.stats(nil, "s.lua")).keys)
  end)

  it("ends a key idle for the series window with its last count written, writes a series again every 30 "
    .. "minutes, and lets an object's bucket go once full again", function()
    record("a", 1)
    record("a", 1)
    record("a", 1) -- count 3: POST, PATCH count 2
    assert.are.same({ "POST", "PATCH" }, { sent[1]:match("^%u+"), sent[2]:match("^%u+") })
    clock = clock + 5 * 60
    record("a", 2) -- not due yet: nothing ends
    assert.are.equal(3, #sent)
    clock = clock + 2 * 60 -- o1's key idle for 7 minutes: ends, its count 3 written
    record("a", 3)
    assert.matches('"count":3', sent[4], 1, true)
    record("a", 1) -- starts over: a new Event
    assert.are.equal("POST", sent[6]:match("^%u+"))
    -- a series seen every 5 minutes is written again 30 minutes after it was
    record("a", 1) -- count 2: PATCH
    local t0, n = clock, #sent
    while clock < t0 + 31 * 60 do
      clock = clock + 5 * 60
      record("a", 1)
    end
    local patches = 0
    for i = n + 1, #sent do
      if sent[i]:match("^PATCH") then patches = patches + 1 end
    end
    assert.are.equal(1, patches)
    -- buckets: full again after 25 times 5 minutes at most, then gone
    for i = 10, 12 do record("a", i) end
    local buckets = events.stats("a").buckets
    assert.is_true(buckets >= 3)
    clock = clock + events.BURST * events.REFILL + 1
    for _ = 1, 4 do record("a", 1) end
    assert.is_true(events.stats("a").buckets < buckets)
  end)

  it("patches a series only once the create before it is answered, with the count of then", function()
    -- the Event recurs while its create is on its way (a slow API server):
    -- its series waits, else it would find no Event, create it again, and
    -- be refused as AlreadyExists
    local inner = core.api.request
    local log = {}
    core.api.request = function(r)
      log[#log + 1] = r.method
      if r.method == "POST" and #log == 1 then
        record("a", 1) -- count 2, then 3, while the create is unanswered
        record("a", 1)
      end
      local status, body = inner(r)
      log[#log + 1] = r.method .. " answered"
      return status, body
    end
    record("a", 1)
    assert.are.same({ "POST", "POST answered", "PATCH", "PATCH answered" }, log)
    assert.matches('"count":3', sent[2], 1, true)
  end)

  it("creates an Event again, with its series, when the patch of its series finds none (its create was lost)",
    function()
      record("a", 1) -- POST
      missing = true -- the create never arrived (an answer cut off, a reset)
      record("a", 1) -- count 2: PATCH, 404, then POST of the whole Event
      assert.are.equal(3, #sent, table.concat(sent, "\n"))
      assert.matches("^PATCH", sent[2])
      assert.matches("^POST", sent[3])
      assert.matches('"series":{[^}]*"count":2', sent[3])
      assert.matches('"reason":"Seen"', sent[3], 1, true)
    end)
end)
