-- luaop.testing.metrics - env:metric(name [, labels]): the value of one
-- sample of /metrics, as a scrape reads it (the registry's text), or nil
-- when there is none. A script's own metric (luaop.metrics) or the
-- runtime's; a histogram's samples by their names: name_count, name_sum,
-- name_bucket with its le label ({ le = "0.5" }, { le = "+Inf" }). The
-- runtime's counters and histograms count from the env's start (M.base).
local core = require "luaop.core"

local M = {}

local UNESCAPE = { ["\\"] = "\\", ['"'] = '"', n = "\n" }
local NUMBERS = { ["+Inf"] = math.huge, ["-Inf"] = -math.huge, NaN = 0 / 0 }

-- One sample line: name, {label = value}, value | nil.
function M.parse_line(line)
  local name, pos = line:match("^([%a_:][%w_:]*)()")
  if not name then return nil end
  local labels = {}
  if line:sub(pos, pos) == "{" then
    pos = pos + 1
    while line:sub(pos, pos) ~= "}" do
      local k, p = line:match('^([%a_][%w_]*)="()', pos)
      if not k then return nil end
      local v = {}
      while true do
        local c = line:sub(p, p)
        if c == "" then return nil end
        if c == '"' then break end
        if c == "\\" then
          c = UNESCAPE[line:sub(p + 1, p + 1)] or ""
          p = p + 1
        end
        v[#v + 1] = c
        p = p + 1
      end
      labels[k] = table.concat(v)
      pos = p + 1
      if line:sub(pos, pos) == "," then pos = pos + 1 end
    end
    pos = pos + 1
  end
  local value = line:match("^ (%S+)", pos)
  if not value then return nil end
  return name, labels, NUMBERS[value] or tonumber(value)
end

local same = require("luaop.object").same_map

-- A sample line's series: its name and labels, as the registry writes
-- them (the same each time), without the value.
local function series(line) return line:match("^(.*) ") end

-- The registry is the process's and outlives an env: the runtime's
-- counters and histograms (controller_runtime_reconcile_total of a
-- controller name an earlier env ran too) would go on from where the last
-- env left them. base() reads what they hold as an env starts; env:metric
-- counts from there, as a new process would from zero. (Gauges are read as
-- they are; a script's own metrics go with their env and start anew.)
function M.base()
  local out, types = {}, {}
  for line in core.metrics.text():gmatch("[^\n]+") do
    local family, typ = line:match("^# TYPE (%S+) (%S+)")
    if family then
      types[family] = typ
    elseif line:sub(1, 1) ~= "#" then
      local n, _, v = M.parse_line(line)
      local h = n and n:match("^(.*)_bucket$") or n and n:match("^(.*)_sum$") or n and n:match("^(.*)_count$")
      if n and (types[n] == "counter" or (h and types[h] == "histogram")) then out[series(line)] = v end
    end
  end
  return out
end

-- env:metric(name [, labels]) -> number | nil
function M.metric(env, name, labels)
  if type(name) ~= "string" then error("env:metric(name [, labels]): name must be a string", 2) end
  if labels ~= nil and type(labels) ~= "table" then
    error("env:metric(name [, labels]): labels must be a table {label = value}", 2)
  end
  for line in core.metrics.text():gmatch("[^\n]+") do
    if line:sub(1, 1) ~= "#" then
      local n, l, v = M.parse_line(line)
      if n == name and same(l, labels or {}) then return v - ((env.metric_base or {})[series(line)] or 0) end
    end
  end
  return nil
end

return M
