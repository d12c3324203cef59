-- spec/support/cut.lua - a TCP proxy in front of the local API server that
-- a spec can cut: start(kubeconfig) returns kubeconfig (a file naming the
-- proxy, the rest as the given one), cut() (every connection closed, new
-- ones refused), restore() and stop(). For luaops that must lose the API
-- server while others keep it (leader election, a shard ring).
local proc = require "support.proc"
local kube = require "support.kube"

local M = {}

local PROXY = [==[
import asyncio, os, sys
target_port, ctl = int(sys.argv[1]), sys.argv[2]
conns = set()
async def pipe(r, w):
    try:
        while True:
            data = await r.read(65536)
            if not data or os.path.exists(ctl + "/down"):
                break
            w.write(data); await w.drain()
    except Exception:
        pass
    finally:
        w.close()
async def handle(r, w):
    if os.path.exists(ctl + "/down"):
        w.close(); return
    try:
        tr, tw = await asyncio.open_connection("127.0.0.1", target_port)
    except OSError:
        w.close(); return
    conns.add(w); conns.add(tw)
    await asyncio.gather(pipe(r, tw), pipe(tr, w))
async def watch_down():
    while True:
        if os.path.exists(ctl + "/down"):
            for w in list(conns):
                w.close()
            conns.clear()
        await asyncio.sleep(0.05)
async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    open(ctl + "/port.tmp", "w").write(str(srv.sockets[0].getsockname()[1]))
    os.rename(ctl + "/port.tmp", ctl + "/port")
    asyncio.ensure_future(watch_down())
    await srv.serve_forever()
asyncio.run(main())
]==]

function M.start(kubeconfig_path)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. proc.quote(dir)))
  local kubeconfig = proc.read(kubeconfig_path)
  local host, port = kubeconfig:match("server: https://([%d.]+):(%d+)")
  assert(host, "no https://IP:PORT server in " .. kubeconfig_path)
  local f = assert(io.open(dir .. "/proxy.py", "w"))
  f:write(PROXY)
  f:close()
  local p = assert(io.popen(("python3 %s %s %s >/dev/null 2>&1 & echo $!"):format(proc.quote(dir .. "/proxy.py"),
    port, proc.quote(dir))))
  local pid = p:read("l")
  p:close()
  local h = { kubeconfig = dir .. "/kubeconfig" }
  function h.stop()
    os.execute("kill " .. pid .. " 2>/dev/null")
    os.execute("rm -rf " .. proc.quote(dir))
  end
  local ok, pport = pcall(kube.wait_for, "the proxy", 10, function() return proc.read(dir .. "/port"):match("%d+") end)
  if not ok then
    h.stop()
    error(pport, 2)
  end
  f = assert(io.open(h.kubeconfig, "w"))
  f:write((kubeconfig:gsub("server: https://[%d.]+:%d+", "server: https://" .. host .. ":" .. pport)))
  f:close()
  function h.cut() assert(io.open(dir .. "/down", "w")):close() end
  function h.restore() os.remove(dir .. "/down") end
  return h
end

return M
