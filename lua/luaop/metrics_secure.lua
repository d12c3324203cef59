-- luaop.metrics_secure - /metrics over HTTPS for authenticated and
-- authorized clients only (--metrics-secure), as kubebuilder v4's default
-- (controller-runtime's filters.WithAuthenticationAndAuthorization).
--
-- The server is core.webhook's (src/tlsserve.c, on a thread of its own)
-- with render = "metrics": each request crosses to the loop, where a task
-- asks luaop.reviews (a TokenReview of the bearer token, a
-- SubjectAccessReview of the verb and path, both cached as
-- controller-runtime caches them) and answers 401, 403 or 500 with the
-- reason, or has the server thread render the registry's text
-- (req:render()), so the loop never writes the metrics text itself. The
-- certificate is --metrics-cert-path's files, reloaded when they change,
-- or a self-signed one made at the start, as controller-runtime makes one.
-- Only /metrics is served (404 elsewhere, as the plain server), by GET and
-- HEAD (405).
local core = require "luaop.core"
local logging = require "luaop.logging"
local reviews = require "luaop.reviews"

local M = {}

local log = logging.logger("metrics")

local TEXT = "text/plain; charset=utf-8"

-- Answer one request: rendered metrics, or why not.
function M.answer(req, reviewer)
  if req.path ~= "/metrics" then return req:reply(404, TEXT, "404 page not found\n") end
  if req.method ~= "GET" and req.method ~= "HEAD" then return req:reply(405, TEXT, "only GET and HEAD\n") end
  local ok, status, message = pcall(reviewer.authorize, reviewer, req.authorization, req.method, req.path)
  if not ok then status, message = 500, "Authorization failed: " .. tostring(status) end
  if status == 200 then return req:render() end
  if status == 500 then log:error("cannot authorize a scrape", { error = message, remote = req.remote }) end
  return req:reply(status, TEXT, message .. "\n")
end

-- Serve server's requests until it closes, each in a task of its own.
function M.serve(server, reviewer)
  while true do
    local req = server:take()
    if not req then return end
    core.task.spawn(M.answer, req, reviewer)
  end
end

-- Start the secure metrics server from options.metrics_secure ({address,
-- cert, key}); client: luaop.client (the reviews' API server). Raises when
-- it cannot start (an address in use, a pair that does not load), as the
-- plain metrics server ends the process then. Returns a handle: port(),
-- serial(), stop().
function M.start(options, client)
  local server, err = core.webhook.start { name = "metrics", address = options.address, cert = options.cert,
    key = options.key, render = "metrics" }
  if not server then error("cannot start the secure metrics server: " .. tostring(err), 0) end
  log:info("Serving metrics server", { bindAddress = options.address, port = server:port(), secure = true,
    cert = options.cert or "(self-signed)" })
  local reviewer = reviews.new(client)
  local task = core.task.spawn(M.serve, server, reviewer)
  local h = {}
  function h.port() return server:port() end
  function h.serial() return server:serial() end
  function h.stop()
    server:close()
    task:wait()
  end
  return h
end

return M
