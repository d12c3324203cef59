-- spec/support/chaos.lua - the chaos proxy (hack/chaos) in front of the
-- local API server, built if needed and killed after 10 minutes should the
-- spec never stop it. start{seed =, rate =, watch_rate =, faults =,
-- strip_shard_selector =} (hack/chaos/main.go's flags; rate 0 and no
-- faults by default) returns kubeconfig, dir (its log: dir/log, a line a
-- fault), stats(), control(what) and stop().
local proc = require "support.proc"
local kube = require "support.kube"
local json = require("luaop.core").json

local M = {}

function M.start(opts)
  opts = opts or {}
  local ok, bin = proc.sh("hack/chaos.sh bin")
  assert(ok, bin)
  bin = bin:match("([^\n]+)\n?$")
  local dir = proc.tempdir()
  local up = dir .. "/upstream.json"
  local f = assert(io.open(up, "w"))
  f:write(kube.must { "config", "view", "--raw", "--minify", "--flatten", "-o", "json" })
  f:close()
  local cmd = ("%s -upstream %s -dir %s -seed %d -rate %g -watch-rate %g"):format(proc.quote(bin), proc.quote(up),
    proc.quote(dir), opts.seed or 1, opts.rate or 0, opts.watch_rate or opts.rate or 0)
  if opts.faults then cmd = cmd .. " -faults " .. proc.quote(opts.faults) end
  if opts.strip_shard_selector then cmd = cmd .. " -strip-shard-selector " .. proc.quote(opts.strip_shard_selector) end
  local _, stop = proc.background(cmd, dir .. "/log", 600)
  local ok_port, port = pcall(kube.wait_for, "the chaos proxy's port", 10, function()
    local v = proc.read(dir .. "/port")
    return v and v:match("%d+")
  end)
  assert(ok_port, tostring(port) .. ": " .. (proc.read(dir .. "/log") or ""))
  local h = { kubeconfig = dir .. "/kubeconfig", dir = dir }
  local base = ("https://127.0.0.1:%s/chaos/"):format(port)
  local function curl(what)
    local cok, out = proc.sh(("curl -s -m 5 --cacert %s %s%s"):format(proc.quote(dir .. "/ca.crt"), base, what))
    assert(cok, out)
    return out
  end
  function h.stats() return json.decode(curl("stats")) end
  function h.control(what) curl(what) end
  function h.stop()
    stop()
    proc.sh("rm -rf " .. proc.quote(dir))
  end
  return h
end

return M
