-- luaop.reviews: the TokenReview and SubjectAccessReview a secure endpoint
-- asks of the API server, against a client that answers as the API server
-- does (the real one: spec/e2e/secure_metrics_spec.lua).
local reviews = require "luaop.reviews"

-- A client answering TokenReviews from tokens (token -> user) and
-- SubjectAccessReviews from grants (username -> { "verb path" = true }),
-- counting what it was asked; fail = true makes every review fail.
local function fake(tokens, grants)
  local c = { asked = { TokenReview = 0, SubjectAccessReview = 0 }, seen = {} }
  function c.create(_, obj)
    c.asked[obj.kind] = c.asked[obj.kind] + 1
    c.seen[#c.seen + 1] = obj
    if c.fail then return nil, "InternalError (500): etcd is gone" end
    if obj.kind == "TokenReview" then
      local user = tokens[obj.spec.token]
      return { status = { authenticated = user ~= nil, user = user } }
    end
    local a = obj.spec.nonResourceAttributes
    local allowed = (grants[obj.spec.user] or {})[a.verb .. " " .. a.path] == true
    return { status = { allowed = allowed, reason = allowed and "RBAC: allowed" or nil } }
  end
  return c
end

describe("luaop.reviews", function()
  local now = 0
  before_each(function() now = 0 end)
  local function clock() return now end

  local function setup()
    local c = fake({ good = { username = "system:serviceaccount:mon:prometheus", uid = "u1", groups = { "g" } },
      other = { username = "system:serviceaccount:mon:nobody", uid = "u2" } },
      { ["system:serviceaccount:mon:prometheus"] = { ["get /metrics"] = true } })
    return c, reviews.new(c, clock)
  end

  it("answers 200 to a token the API server authenticates for a user allowed the path, 401 without one, 403 otherwise",
    function()
    local c, r = setup()
    assert.are.same({ 200, "OK" }, { r:authorize("Bearer good", "GET", "/metrics") })
    assert.are.same({ 401, "Unauthorized" }, { r:authorize(nil, "GET", "/metrics") })
    assert.are.same({ 401, "Unauthorized" }, { r:authorize("Basic dXNlcjpwYXNz", "GET", "/metrics") })
    assert.are.same({ 401, "Unauthorized" }, { r:authorize("Bearer forged", "GET", "/metrics") })
    assert.are.same({ 403, "Authorization denied for user system:serviceaccount:mon:nobody" },
      { r:authorize("Bearer other", "GET", "/metrics") })
    assert.are.same({ 403, "Authorization denied for user system:serviceaccount:mon:prometheus" },
      { r:authorize("Bearer good", "GET", "/debug") })
    -- the review asked is the request's: a nonResourceURL, the verb lowercased, the user as authenticated
    local sar = c.seen[2]
    assert.are.same({ path = "/metrics", verb = "get" }, sar.spec.nonResourceAttributes)
    assert.are.same({ "system:serviceaccount:mon:prometheus", "u1", { "g" } }, { sar.spec.user, sar.spec.uid,
      sar.spec.groups })
  end)

  it("caches as controller-runtime does: authentication 1 minute, allowed 5 minutes, denied 30 s", function()
    local c, r = setup()
    for _ = 1, 3 do assert.are.equal(200, (r:authorize("Bearer good", "GET", "/metrics"))) end
    assert.are.same({ TokenReview = 1, SubjectAccessReview = 1 }, c.asked)
    now = 59
    r:authorize("Bearer good", "GET", "/metrics")
    assert.are.same({ TokenReview = 1, SubjectAccessReview = 1 }, c.asked)
    now = 61 -- the token again, the decision still cached
    r:authorize("Bearer good", "GET", "/metrics")
    assert.are.same({ TokenReview = 2, SubjectAccessReview = 1 }, c.asked)
    now = 301
    r:authorize("Bearer good", "GET", "/metrics")
    assert.are.same({ TokenReview = 3, SubjectAccessReview = 2 }, c.asked) -- (the token's from 61 expired too)
    -- denied: asked again after 30 s
    r:authorize("Bearer other", "GET", "/metrics")
    now = 320
    r:authorize("Bearer other", "GET", "/metrics")
    assert.are.equal(3, c.asked.SubjectAccessReview)
    now = 332
    r:authorize("Bearer other", "GET", "/metrics")
    assert.are.equal(4, c.asked.SubjectAccessReview)
  end)

  it("answers 500 when a review fails, caching nothing, and never puts the token in a message or a cache key", function()
    local c, r = setup()
    c.fail = true
    local status, msg = r:authorize("Bearer good", "GET", "/metrics")
    assert.are.equal(500, status)
    assert.matches("etcd is gone", msg)
    assert.is_nil(msg:find("good", 1, true))
    c.fail = false
    assert.are.equal(200, (r:authorize("Bearer good", "GET", "/metrics")))
    assert.are.equal(2, c.asked.TokenReview)
    for key in pairs(r.users) do assert.matches("^%x+$", key) end
  end)

  it("keeps each cache bounded, dropping the expired first", function()
    local c = fake({}, {})
    local r = reviews.new(c, clock)
    for i = 1, reviews.MAX_ENTRIES + 50 do r:authorize("Bearer t" .. i, "GET", "/metrics") end
    local n = 0
    for _ in pairs(r.users) do n = n + 1 end
    assert.are.equal(reviews.MAX_ENTRIES, n)
  end)
end)
