-- luaop.client.view - what a script gets for a client (luaop.script.sandbox);
-- a part of luaop.client.
local client = require "luaop.client"

local M = {}

--
-- What a script gets for a client (luaop.script): methods over a client,
-- never the client, its class or anything they hold (discovery's cache,
-- the watch's stream). Its metatable and method table are the same for
-- every view and hold only functions (no __index table), so indexing a view
-- yields a method or the client's namespace and server, never a table of
-- luaop's; what a script sets on its view stays in its view. A watch is
-- such a handle too. Each method finds its client by its own self (a view
-- a script made up finds none and raises).
local viewed = setmetatable({}, { __mode = "k" }) -- view -> client, watch handle -> watch
-- A script's quota of open watches, shared by its views ({open =, max =}):
-- view -> quota; a watch handle still counted -> quota.
local quotas = setmetatable({}, { __mode = "k" })
local counted = setmetatable({}, { __mode = "k" })

-- A watch handle stops counting against its script's quota: closed, ended
-- or collected (whichever comes first; once).
local function uncount(h)
  local q = counted[h]
  if q then
    counted[h] = nil
    q.open = q.open - 1
  end
end

local function target(self, what)
  local t = viewed[self]
  if t == nil then error(("call it as %s:method(...)"):format(what), 3) end
  return t
end

local watch_methods = {}
function watch_methods.next(self)
  local t, o = target(self, "watch"):next()
  rawset(self, "err", target(self, "watch").err)
  if t == nil then uncount(self) end -- its stream is over
  return t, o
end
function watch_methods.events(self)
  target(self, "watch")
  return function() return watch_methods.next(self) end
end
function watch_methods.close(self)
  target(self, "watch"):close()
  uncount(self)
end
local watch_mt = {
  __index = watch_methods,
  __close = function(self)
    local w = viewed[self]
    if w then w:close() end
    uncount(self)
  end,
  __gc = uncount, -- (its stream is closed by its own finalizer)
  __metatable = false,
}

local view_methods = {}
for _, verb in ipairs { "get", "list", "create", "update", "update_status", "patch", "apply", "delete" } do
  local f = client[verb]
  view_methods[verb] = function(self, ...) return f(target(self, "client"), ...) end
end
function view_methods.watch(self, ...)
  local c = target(self, "client")
  local q = quotas[self]
  if q and q.open >= q.max then
    error(("%d watches of this script are open, the most it may have: close one (w:close()) before opening another")
      :format(q.max), 2)
  end
  local w, err = client.watch(c, ...)
  if not w then return nil, err end
  local h = setmetatable({}, watch_mt)
  viewed[h] = w
  if q then
    q.open = q.open + 1
    counted[h] = q
  end
  return h
end
-- fields a view reads from its client: strings
local view_fields = { namespace = true, server = true }
local view_mt = {
  __index = function(self, k)
    local m = view_methods[k]
    if m ~= nil then return m end
    if view_fields[k] then
      local v = rawget(viewed[self] or {}, k)
      if type(v) == "string" then return v end
    end
    return nil
  end,
  __metatable = false,
}

-- A new view of client c. quota: {open = 0, max = N}, shared by every view
-- of one script: at most max of its watches open at once (nil: no cap).
function M.view(c, quota)
  local v = setmetatable({}, view_mt)
  viewed[v] = c
  quotas[v] = quota
  return v
end

return M
