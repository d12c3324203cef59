-- luaop.logging - loggers over the runtime's log (src/log.c): what luaop.logger
-- and luaop.log are, and what every internal module logs through.
local core = require "luaop.core"

local M = {}

-- A logger: log:info(msg, {k = v}), :error, :debug; :with{k = v} adds values.
-- Every logger's metatable is this one, shared, holding only the method
-- table (functions only): indexing a logger yields a method, never a table
-- of luaop's (a script's ctx.log is a logger, and with Logger.__index =
-- Logger, ctx.log.__index.info = f changed every logger of the process).
local Logger = {}
local logger_mt = { __index = Logger, __metatable = false }

local function merge(a, b)
  if not b then return a end
  local out = {}
  for k, v in pairs(a) do out[k] = v end
  for k, v in pairs(b) do out[k] = v end
  return out
end

function Logger:info(msg, kv) core.log.write("info", self.name, msg, merge(self.values, kv)) end
function Logger:error(msg, kv) core.log.write("error", self.name, msg, merge(self.values, kv)) end
function Logger:debug(msg, kv) core.log.write("debug", self.name, msg, merge(self.values, kv)) end
function Logger:with(kv) return setmetatable({ name = self.name, values = merge(self.values, kv or {}) }, logger_mt) end

-- The names of a logger's methods, sorted (luaop --check's "did you mean").
function M.method_names()
  local out = {}
  for k in pairs(Logger) do out[#out + 1] = k end
  table.sort(out)
  return out
end

function M.logger(name)
  return setmetatable({ name = name or "script", values = {} }, logger_mt)
end

return M
