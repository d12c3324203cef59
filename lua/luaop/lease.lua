-- luaop.lease - what leader election (luaop.leader) and a shard ring's
-- membership (luaop.shard.member) do alike with coordination.k8s.io/v1
-- Leases: a request made with the fence's key (core.api.fence: it leaves
-- while fenced, and is not held behind --qps), its answer decoded; and how
-- long a record holds its lease.
local core = require "luaop.core"

local json, api = core.json, core.api

local M = {}

-- METHOD PATH [body] with key (core.api.fence's) within timeout seconds:
-- status, the decoded body (or nil), its text.
function M.request(key, timeout, method, path, body)
  local status, text = api.request { method = method, path = path, timeout = timeout,
    body = body and json.encode(body), content_type = body and "application/json", lease = key }
  local obj = status and text and text ~= "" and json.decode(text) or nil
  return status, obj, text
end

-- A record's leaseDurationSeconds (the holder's, which may be longer than
-- this process's own), or default when it has none that is a positive
-- integer.
function M.duration(spec, default)
  local d = math.tointeger(spec.leaseDurationSeconds)
  if d and d > 0 then return d end
  return default
end

return M
