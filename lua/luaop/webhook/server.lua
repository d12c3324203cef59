-- luaop.webhook.server - the webhook server's serving loop: a task per
-- server takes each request (core.webhook's server:take(), which parks it
-- until one arrives) and answers it in a task of its own with what the
-- registry's handle says (req:reply(status, content_type, body)). The
-- server (TLS, on a thread of its own: src/lbind_webhook.c) starts when the
-- first webhook definition loads, as controller-runtime starts its webhook
-- server only with webhooks registered, from the flags kubebuilder's
-- scaffold names: --webhook-bind-address (":9443"; "0": off),
-- --webhook-cert-path, --webhook-cert-name, --webhook-cert-key.
local core = require "luaop.core"
local logging = require "luaop.logging"
local supervisor = require "luaop.supervisor"

local M = {}

-- How long to wait before trying again to start a server that did not
-- (its certificate not written yet, say: cert-manager's comes later).
M.RETRY = 5

local log = logging.logger("webhook")

-- Serve server's requests with registry until the server closes. The
-- requests being answered are kept (registry.running; registry.finished
-- signalled as each ends), so that M.stop lets them finish.
function M.serve(server, registry)
  registry.running = registry.running or {}
  registry.finished = registry.finished or core.task.cond()
  while true do
    local req = server:take()
    if not req then return true end -- closed
    local token = {}
    registry.running[token] = true
    core.task.spawn(function()
      local ok, status, ctype, body = pcall(registry.handle, registry, req.method, req.path, req.content_type,
        req.body)
      if ok then req:reply(status, ctype, body) end -- (not: answered 500 when collected)
      registry.running[token] = nil
      registry.finished:signal()
    end)
  end
end

-- What core.webhook.start takes, from the runtime's options (the flags,
-- as src/main.c hands them: options.webhook = {address, cert, key}, absent
-- with --webhook-bind-address=0): its table, or nil and why the server is
-- off.
function M.config(options)
  local w = type(options) == "table" and options.webhook
  if type(w) ~= "table" then return nil, "--webhook-bind-address is 0" end
  return { address = w.address, cert = w.cert, key = w.key }
end

-- A registry's start (luaop.webhook.new's opts.start) for a run with these
-- options: the server started, tried again every M.RETRY seconds while it
-- does not start, and served until stopped (registry.server:close()).
function M.starter(options)
  return function(registry)
    local binding = core.webhook
    if not binding then
      log:error("webhooks are defined, but this luaop has no webhook server: they are not served", {})
      return
    end
    local cfg, off = M.config(options)
    if not cfg then
      log:info("webhooks are defined, but the webhook server is off", { reason = off })
      return
    end
    supervisor.spawn("webhook", { name = cfg.address, done = function() return registry.stopped end }, function()
      while not registry.server and not registry.stopped do
        local server, err = binding.start(cfg)
        if server then
          registry.server = server
          log:info("Starting webhook server", { address = cfg.address, port = server:port(), cert = cfg.cert,
            key = cfg.key })
        else
          log:error("cannot start the webhook server: trying again", { address = cfg.address, error = tostring(err),
            retryIn = M.RETRY })
          core.task.sleep(M.RETRY)
        end
      end
      if registry.stopped then return true end
      M.serve(registry.server, registry)
      return registry.stopped or nil
    end)
  end
end

-- Stop serving: the requests being answered now finish (for at most
-- `wait` seconds: the manager's grace left after its drain; none when nil),
-- as controller-runtime's webhook server shuts down gracefully, then the
-- server closes (its take returns nil; a request not answered by then, or
-- come since, gets no answer, and its failurePolicy decides: a steady
-- stream of new ones does not hold the shutdown).
function M.stop(registry, wait)
  registry.stopped = true
  local deadline = core.task.now() + (wait or 0)
  local running = {}
  for token in pairs(registry.running or {}) do running[#running + 1] = token end
  for _, token in ipairs(running) do
    while registry.running[token] do
      local left = deadline - core.task.now()
      if left <= 0 then break end
      registry.finished:wait(left)
    end
  end
  if registry.server then registry.server:close() end
end

return M
