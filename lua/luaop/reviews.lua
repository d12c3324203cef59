-- luaop.reviews - who may read a secure endpoint: the bearer token checked
-- by a TokenReview, the request by a SubjectAccessReview, both asked of the
-- API server, as controller-runtime's metrics filter
-- (filters.WithAuthenticationAndAuthorization, kubebuilder v4's default for
-- --metrics-secure) and the kubelet do.
--
--   local reviews = require "luaop.reviews"
--   local r = reviews.new(client)            -- client: luaop.client
--   local status, message = r:authorize(authorization_header, "GET", "/metrics")
--     -- 200; 401 "Unauthorized" (no bearer token, or one the API server
--     -- does not authenticate); 403 "Authorization denied for user NAME";
--     -- 500 when a review could not be made (the API server's answer in
--     -- message, never the token)
--
-- Answers are cached as controller-runtime caches them: a token's
-- authentication for AUTHN_TTL (1 minute), an allowed request for ALLOW_TTL
-- (5 minutes), a denied one for DENY_TTL (30 s); a failed review is not
-- cached. Tokens are kept only as their SHA-256 and never logged. The
-- verb is the method lowercased and the path the request's, as a
-- nonResourceURL: what a ClusterRole's `nonResourceURLs: ["/metrics"],
-- verbs: ["get"]` grants.
local core = require "luaop.core"

local M = {}

M.AUTHN_TTL, M.ALLOW_TTL, M.DENY_TTL = 60, 300, 30
M.MAX_ENTRIES = 1024 -- per cache: past it, the expired go, then the oldest

local reviewer = {}
reviewer.__index = reviewer

-- A reviewer asking through client (luaop.client); clock: seconds
-- (default: the runtime's monotonic clock).
function M.new(client, clock)
  assert(client, "luaop.reviews.new: a client")
  return setmetatable({ client = client, now = clock or core.task.now, users = {}, decisions = {} }, reviewer)
end

local function token_of(header)
  if type(header) ~= "string" then return nil end
  local token = header:match("^Bearer (%S+)%s*$")
  return token
end

-- cache[key] = { value, expires }; bounded
local function remember(self, cache, key, value, ttl)
  local n, oldest, oldest_at = 0, nil, math.huge
  local now = self.now()
  for k, e in pairs(cache) do
    if e.expires <= now then
      cache[k] = nil
    else
      n = n + 1
      if e.expires < oldest_at then oldest, oldest_at = k, e.expires end
    end
  end
  if n >= M.MAX_ENTRIES and oldest ~= nil then cache[oldest] = nil end
  cache[key] = { value = value, expires = now + ttl }
end

local function recall(self, cache, key)
  local e = cache[key]
  if e and e.expires > self.now() then return e.value end
  cache[key] = nil
  return nil
end

-- The user a token is: { username, uid, groups, extra } | false (not
-- authenticated) | nil, err (the review failed).
function reviewer:authenticate(token)
  local key = core.json.hash(token)
  local user = recall(self, self.users, key)
  if user ~= nil then return user end
  local review, err = self.client:create {
    apiVersion = "authentication.k8s.io/v1", kind = "TokenReview",
    spec = { token = token },
  }
  if not review then return nil, err end
  local status = review.status or {}
  user = status.authenticated == true and status.user or false
  remember(self, self.users, key, user, M.AUTHN_TTL)
  return user
end

-- Whether user may verb path: true | false, reason | nil, err.
function reviewer:permits(user, verb, path)
  local key = core.json.hash { user.username or "", user.uid or "", user.groups or {}, verb, path }
  local decision = recall(self, self.decisions, key)
  if decision ~= nil then return decision.allowed, decision.reason end
  local extra
  if type(user.extra) == "table" and next(user.extra) ~= nil then extra = user.extra end
  local sar, err = self.client:create {
    apiVersion = "authorization.k8s.io/v1", kind = "SubjectAccessReview",
    spec = { user = user.username, uid = user.uid, groups = user.groups, extra = extra,
      nonResourceAttributes = { path = path, verb = verb } },
  }
  if not sar then return nil, err end
  local status = sar.status or {}
  decision = { allowed = status.allowed == true, reason = status.reason }
  remember(self, self.decisions, key, decision, decision.allowed and M.ALLOW_TTL or M.DENY_TTL)
  return decision.allowed, decision.reason
end

-- status, message for a request with this Authorization header.
function reviewer:authorize(header, method, path)
  local token = token_of(header)
  if not token then return 401, "Unauthorized" end
  local user, err = self:authenticate(token)
  if user == nil then return 500, "Authentication failed: " .. tostring(err) end
  if not user then return 401, "Unauthorized" end
  local verb = tostring(method or "GET"):lower()
  local allowed, why = self:permits(user, verb, path)
  local name = tostring(user.username or "")
  if allowed == nil then return 500, ("Authorization for user %s failed: %s"):format(name, tostring(why)) end
  if not allowed then return 403, ("Authorization denied for user %s"):format(name) end
  return 200, "OK"
end

return M
