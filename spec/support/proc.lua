-- spec/support/proc.lua - run a command and capture what it printed.
local proc = {}

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Run argv; returns exit code, stdout, stderr. The child does not inherit a
-- sanitizer runtime preloaded into the spec runner.
function proc.run(argv)
  local parts = { "env", "-u", "LD_PRELOAD" }
  for _, a in ipairs(argv) do parts[#parts + 1] = quote(a) end
  local err = os.tmpname()
  local p = assert(io.popen(table.concat(parts, " ") .. " 2>" .. quote(err), "r"))
  local out = p:read("a")
  local _, _, code = p:close()
  local f = assert(io.open(err, "r"))
  local stderr = f:read("a")
  f:close()
  os.remove(err)
  return code, out, stderr
end

return proc
