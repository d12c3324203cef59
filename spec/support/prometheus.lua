-- spec/support/prometheus.lua - Debian's Prometheus server for a spec: one
-- job, "luaop", scraping `targets` every second from a free loopback port;
-- `base` is its HTTP API's root, `log()` its output, `stop()` ends it and
-- removes its files (it also ends by itself after 300 s).
local proc = require "support.proc"

local M = {}

-- targets: a YAML flow list of static_configs entries, e.g.
-- '{targets: ["127.0.0.1:8080"]}'; job: more of the job's YAML, each line
-- indented two spaces (scheme, tls_config, authorization), or nil
function M.start(targets, job)
  local dir = proc.tempdir()
  local f = assert(io.open(dir .. "/prometheus.yml", "w"))
  f:write(([[
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
- job_name: luaop
  static_configs: [%s]
%s]]):format(targets, job or ""))
  f:close()
  local port = proc.free_port()
  local _, stop = proc.background(("prometheus --config.file=%s --storage.tsdb.path=%s --web.listen-address=127.0.0.1:%d")
    :format(proc.quote(dir .. "/prometheus.yml"), proc.quote(dir .. "/data"), port), dir .. "/log", 300)
  return {
    base = ("http://127.0.0.1:%d"):format(port),
    log = function() return proc.read(dir .. "/log") end,
    stop = function()
      stop()
      os.execute("rm -rf " .. proc.quote(dir))
    end,
  }
end

return M
