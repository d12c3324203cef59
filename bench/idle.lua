-- bench/idle.lua NS REQUEST REPLY: three controllers with empty caches (Secrets,
-- Services and Deployments of NS, which has none), idle until SIGTERM.
-- When the file REQUEST appears, writes to REPLY the Lua heap in KiB as it
-- is and after a full GC ("lua_kib X", "lua_gc_kib Y"), and goes on.
local luaop = require "luaop"

local ns, request, reply = arg[1], arg[2], arg[3]

luaop.spawn(function()
  while true do
    local f = io.open(request)
    if f then
      f:close()
      os.remove(request)
      local before = collectgarbage("count")
      collectgarbage("collect")
      local out = assert(io.open(reply .. ".tmp", "w"))
      out:write(("lua_kib %.1f\nlua_gc_kib %.1f\n"):format(before, collectgarbage("count")))
      out:close()
      os.rename(reply .. ".tmp", reply)
    end
    luaop.sleep(0.5)
  end
end)

local function noop() end
return {
  luaop.controller { name = "secrets", resource = "v1/Secret", namespace = ns, reconcile = noop },
  luaop.controller { name = "services", resource = "v1/Service", namespace = ns, reconcile = noop },
  luaop.controller { name = "deployments", resource = "apps/v1/Deployment", namespace = ns, reconcile = noop },
}
