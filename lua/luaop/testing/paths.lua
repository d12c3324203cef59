-- luaop.testing.paths - the paths a spec gives the test kit (testing.env's
-- script, scripts and manifests, env:load's): against the directory of
-- the spec file that calls the kit first, then the working directory, so
-- a spec runs from any directory (`luaop --test`, busted).
local guard = require "luaop.testing.guard"

local M = {}

-- The directory of the spec file that called the kit: the first file on
-- the stack named *_spec.lua or *_test.lua, else the first outside the kit.
local function caller_dir()
  local first
  for level = 2, 64 do
    local info = debug.getinfo(level, "S")
    if not info then break end
    local src = info.source
    if src:sub(1, 1) == "@" and not src:find("luaop/testing/", 1, true) then
      if src:match("_spec%.lua$") or src:match("_test%.lua$") then first = src break end
      first = first or src
    end
  end
  return first and (first:sub(2):match("^(.*)/[^/]*$") or ".")
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- A path as testing.env and env:load take it: absolute as it is; else
-- against the directory of the calling spec file first, then the working
-- directory. Raises, naming both, when neither has it.
function M.resolve(path)
  if type(path) ~= "string" or path == "" then error("a path is required, got " .. tostring(path), 3) end
  if path:sub(1, 1) == "/" then return path end
  local dir = caller_dir()
  local beside = dir and dir ~= "." and (dir .. "/" .. path):gsub("^%./", "")
  if beside and exists(beside) then return beside end
  if exists(path) then return path end
  error(("%scannot find %s: tried %s (beside the spec) and %s (the working directory)"):format(guard.where(),
    path, beside or path, path), 0)
end

return M
