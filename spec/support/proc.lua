-- spec/support/proc.lua - run a command and capture what it printed.
local proc = {}

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Run argv; returns exit code, stdout, stderr. The child does not inherit a
-- sanitizer runtime preloaded into the spec runner. env: {NAME = value} to
-- set, {NAME = false} to unset.
function proc.run(argv, env)
  local parts = { "env", "-u", "LD_PRELOAD" }
  -- env takes its -u options before any NAME=value
  for k, v in pairs(env or {}) do
    if v == false then
      parts[#parts + 1] = "-u"
      parts[#parts + 1] = quote(k)
    end
  end
  for k, v in pairs(env or {}) do
    if v ~= false then parts[#parts + 1] = quote(k .. "=" .. v) end
  end
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
