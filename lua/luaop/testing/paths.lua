-- luaop.testing.paths - the paths a spec gives the test kit (testing.env's
-- script, scripts and manifests, env:load's): against the directory of
-- the spec file that calls the kit first, then the working directory, so
-- a spec runs from any directory (`luaop --test`, busted); and the files
-- they name read (scripts, YAML manifests).
local core = require "luaop.core"
local guard = require "luaop.testing.guard"
local kit = core.kit

local M = {}

-- The directory of the spec file that called the kit: the first file on
-- the stack named *_spec.lua or *_test.lua, else the first outside the kit.
local function caller_dir()
  local first
  for level = 2, 64 do
    local info = debug.getinfo(level, "S")
    if not info then break end
    local src = info.source
    if src:sub(1, 1) == "@" and not guard.is_kit(src) then
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

-- A file's text; raises at the caller's caller what could not be read.
function M.read(path)
  local f, err = io.open(path, "rb")
  if not f then error("cannot read " .. tostring(err), 3) end
  local text = f:read("a")
  f:close()
  return text
end

-- The YAML files a path names: itself, or a directory's *.yaml and *.yml
-- (sorted; kustomization.yaml is not a manifest).
function M.yaml_files(path)
  local kind, err = kit.kind(path) -- (at once: core.fs's are a trip to the thread pool)
  if not kind then error("cannot read manifests " .. tostring(err), 0) end
  if kind ~= "directory" then return { path } end
  local names = assert(kit.list(path))
  table.sort(names)
  local out = {}
  for _, name in ipairs(names) do
    if name:match("%.ya?ml$") and not name:match("^kustomization%.") then out[#out + 1] = path .. "/" .. name end
  end
  return out
end

-- The documents of a manifest file (empty ones left out), each as
-- {kind =, text =}: its kind and its JSON text, made the first time (specs
-- seed the same manifests for every test: the server decodes the text into
-- fresh tables, as it would a table given, with no copy and no encoding).
-- A document JSON cannot hold is {kind =, object =} (seeding it raises).
local decoded = {}
function M.documents(path)
  local text = M.read(path)
  local docs = decoded[text]
  if not docs then
    local all, err = core.yaml.decode(text)
    if not all then error(("%s: %s"):format(path, err), 3) end
    docs = {}
    for _, d in ipairs(all) do
      if next(d) ~= nil then
        local ok, json = pcall(core.json.encode, d)
        docs[#docs + 1] = ok and { kind = d.kind, text = json } or { kind = d.kind, object = d }
      end
    end
    decoded[text] = docs
  end
  return docs
end

return M
