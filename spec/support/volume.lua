-- spec/support/volume.lua - a directory laid out and updated the way the
-- kubelet lays out a ConfigMap volume (its atomic writer): the files live
-- in a timestamped directory, `..data` links to it, and each visible file
-- is a link through `..data`. An update writes a new directory, points
-- `..data_tmp` at it, renames that over `..data` (one atomic step), then
-- removes the old directory and the links of files that went away.
local M = {}
local Volume = {}
Volume.__index = Volume

local function sh(cmd)
  assert(os.execute(cmd), cmd)
end

-- files: {name = content}. Returns a volume: .dir, :update(files), :remove().
function M.new(files)
  local p = assert(io.popen("mktemp -d"))
  local dir = p:read("l")
  p:close()
  local v = setmetatable({ dir = dir, gen = 0, names = {} }, Volume)
  v:update(files)
  return v
end

function Volume:update(files)
  self.gen = self.gen + 1
  local old = self.current
  local ts = ("..2026_11_22_00_00_%02d.%d"):format(self.gen % 60, self.gen)
  sh(("mkdir '%s/%s'"):format(self.dir, ts))
  for name, content in pairs(files) do
    local f = assert(io.open(("%s/%s/%s"):format(self.dir, ts, name), "w"))
    f:write(content)
    f:close()
  end
  sh(("ln -s '%s' '%s/..data_tmp' && mv -T '%s/..data_tmp' '%s/..data'"):format(ts, self.dir, self.dir, self.dir))
  for name in pairs(files) do
    if not self.names[name] then sh(("ln -s '..data/%s' '%s/%s'"):format(name, self.dir, name)) end
  end
  for name in pairs(self.names) do
    if not files[name] then sh(("rm -f '%s/%s'"):format(self.dir, name)) end
  end
  if old then sh(("rm -rf '%s/%s'"):format(self.dir, old)) end
  self.current = ts
  self.names = {}
  for name in pairs(files) do self.names[name] = true end
end

function Volume:remove()
  sh(("rm -rf '%s'"):format(self.dir))
end

return M
