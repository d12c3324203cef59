-- luaop.check - `luaop --check PATH...`: each script (a file, or each
-- *.lua of a directory) checked as luaop would load it, with no cluster and
-- no kubeconfig:
--   - it compiles (syntax errors, with file and line);
--   - every global it reads is one the sandbox offers, and it sets none
--     (a typo, or a missing `local`; read from the bytecode, so code that
--     has never run is checked too: core.check);
--   - its top level runs under the load budget and returns controller
--     definitions that validate (resources, owns, watches, budgets,
--     concurrency), their names unique across the scripts.
-- Each finding is printed as `file:line: message`; the exit status is 1
-- when there is one, else 0.
local core = require "luaop.core"
local script = require "luaop.script"
local sandbox = require "luaop.script.sandbox"

local M = {}

-- The globals a script's environment offers.
local function known_globals()
  local known = {}
  for k in next, sandbox.env() do known[k] = true end
  return known
end

-- The findings of one script, each "file:line: message", and its
-- definitions when it loads.
function M.file(path, text, known)
  local chunk, err = script.compile(path, text)
  if not chunk then return { script.located(path, err) } end
  local out, sets = {}, {}
  local globals = core.check.globals(chunk)
  for _, g in ipairs(globals) do
    if g.set then sets[g.name] = true end
  end
  for _, g in ipairs(globals) do
    local msg
    if g.set then
      msg = ("setting global %s: declare it local"):format(g.name)
    elseif sandbox.REFUSED[g.name] then
      msg = ("%s is not available to luaop scripts (no %s in the sandbox)"):format(g.name, sandbox.REFUSED[g.name])
    elseif not known[g.name] and not sets[g.name] then
      msg = ("unknown global %s"):format(g.name)
    end
    if msg then out[#out + 1] = ("%s:%d: %s"):format(path, g.line, msg) end
  end
  if #out > 0 then return out end -- running it would only fail on them
  local defs, lerr = script.load(path, text)
  -- the message, not the traceback through luaop's own frames
  if not defs then return { (tostring(lerr):gsub("\nstack traceback:.*$", "")) } end
  lerr:stop() -- (its owner: nothing it started runs on)
  return out, defs
end

-- Check the scripts the paths hold; print the findings; the exit status.
function M.run(paths)
  local findings, checked = {}, 0
  local function found(msg)
    findings[#findings + 1] = msg
    io.stdout:write(msg, "\n")
  end
  local sources, err = script.sources(paths)
  local files = sources and script.files(sources) or {}
  if not sources then found(err) end
  local known, names = known_globals(), {}
  for _, path in ipairs(files) do
    checked = checked + 1
    local text, rerr = script.read(path)
    if not text then
      found(path .. ": " .. tostring(rerr))
    else
      local out, defs = M.file(path, text, known)
      for _, msg in ipairs(out) do found(msg) end
      for _, d in ipairs(defs or {}) do
        if names[d.name] then
          found(("%s: two controllers are named %s (the other in %s)"):format(path, d.name, names[d.name]))
        end
        names[d.name] = path
      end
    end
  end
  if sources and checked == 0 then found(table.concat(paths, ", ") .. ": no *.lua script to check") end
  io.stdout:flush()
  io.stderr:write(("luaop --check: %d script%s, %d finding%s\n"):format(checked, checked == 1 and "" or "s",
    #findings, #findings == 1 and "" or "s"))
  return #findings == 0 and 0 or 1
end

return M
