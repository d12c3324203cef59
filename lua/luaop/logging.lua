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

local function shown(v)
  if type(v) == "string" then return ("the string %q"):format(v) end
  if v == nil or type(v) == "number" or type(v) == "boolean" then return tostring(v) end
  return "a " .. type(v)
end

-- Misuse of a logger's method raises at the caller's line (level 3: the
-- caller of the method that called this) saying what is wrong.
local function check(method, self, msg, kv)
  local form = ("log:%s(%s)"):format(method, method == "with" and "fields" or "msg [, fields]")
  -- (a call with a dot passes msg as self. Read through the view a script
  -- sees luaop.log as, not raw; no set of loggers tells: every script's
  -- logger would reach it, spec/unit/reach_spec.lua)
  if type(self) ~= "table" or type(self.values) ~= "table" or type(self.name) ~= "string" then
    error(("log:%s is a method: call it with a colon (ctx.log:%s(...))"):format(method, method), 3)
  end
  if method ~= "with" and type(msg) ~= "string" and type(msg) ~= "number" then
    error(("%s: msg must be a string, got %s"):format(form, shown(msg)), 3)
  end
  if kv == nil then return end
  if type(kv) ~= "table" then
    error(("%s: fields must be a table {key = value, ...}, got %s"):format(form, shown(kv)), 3)
  end
  for k in pairs(kv) do
    if type(k) ~= "string" then
      error(("%s: fields must be a table {key = value, ...} with string keys, got the key %s"):format(form,
        shown(k)), 3)
    end
  end
end

local function merge(a, b)
  if not b then return a end
  local out = {}
  for k, v in pairs(a) do out[k] = v end
  for k, v in pairs(b) do out[k] = v end
  return out
end

local function logger(name, values)
  return setmetatable({ name = name, values = values }, logger_mt)
end

for _, level in ipairs { "info", "error", "debug" } do
  Logger[level] = function(self, msg, kv)
    check(level, self, msg, kv)
    core.log.write(level, self.name, msg, merge(self.values, kv))
  end
end

function Logger:with(kv)
  check("with", self, nil, kv)
  return logger(self.name, merge(self.values, kv or {}))
end

-- The names of a logger's methods, sorted (luaop --check's "did you mean").
function M.method_names()
  local out = {}
  for k in pairs(Logger) do out[#out + 1] = k end
  table.sort(out)
  return out
end

function M.logger(name)
  return logger(name or "script", {})
end

return M
