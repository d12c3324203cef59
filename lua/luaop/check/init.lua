-- luaop.check - `luaop --check PATH...`: each script (a file, or each
-- *.lua of a directory) checked as luaop would load it, with no cluster and
-- no kubeconfig, everything in one run:
--   - it compiles (syntax errors, with file and line);
--   - every global it reads is one the sandbox offers, and it sets none
--     (a typo, or a missing `local`; read from the bytecode, so code that
--     has never run is checked too: core.check);
--   - every luaop function and ctx method it uses exists (read from the
--     bytecode too: luaop.check.uses; a ctx may be a table of the script's
--     own, so only a ctx method call near a real one is an error, other
--     unknown reads through ctx warnings, and what the script writes to ctx
--     its own), and the kinds it gives ctx:get, list, patch and delete as
--     constants are served (luaop.check.kinds);
--   - its top level runs under the load budget (run even when the above
--     found something) and every problem of every definition it makes is
--     reported: unknown fields (with the nearest known one), values out of
--     range, kinds not served; names unique across the scripts.
-- The modules of a directory (NAME.lib.lua, luaop.script.modules) load as
-- the scripts that require them do; each is checked as a script is but not
-- run, and a file whose NAME require cannot take is a finding.
-- Each finding is printed as `file:line: message`, the line of the field or
-- call at fault; a warning as `file:line: warning: message`, one about a
-- kind or a ctx field once a script, at its first line, with how many other
-- places it holds at. The exit status is 1 when there is a finding
-- (warnings aside), else 0.
local core = require "luaop.core"
local definition = require "luaop.definition"
local kinds = require "luaop.check.kinds"
local uses = require "luaop.check.uses"
local script = require "luaop.script"
local script_metrics = require "luaop.metrics"
local sandbox = require "luaop.script.sandbox"
local modules = require "luaop.script.modules"
local wdef = require "luaop.webhook.definition"

local M = {}

-- The globals a script's environment offers.
local function known_globals()
  local known = {}
  for k in next, sandbox.env() do known[k] = true end
  return known
end

-- The line nearest to line (or the first) of text that sets field, or nil.
local function text_line(text, field, line)
  local best, n = nil, 0
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local sets = l:find("%f[%w_]" .. field:gsub("%p", "%%%0") .. "%s*=")
    if sets and (not best or math.abs(n - line) < math.abs(best - line)) then best = n end
  end
  return best
end

-- The first line of a table of lines (name -> line), or nil.
local function first(lines)
  local min
  for _, l in pairs(lines or {}) do min = (not min or l < min) and l or min end
  return min
end

-- The findings about the definitions a script made: their problems
-- (luaop.definition) and kinds, each at the line of its field.
local function definitions(made, fields, text, catalog, add)
  local defs = {}
  for _, m in ipairs(made) do
    if type(m.def) == "table" then defs[#defs + 1] = m.def end
  end
  local lines = uses.field_lines(fields, defs)
  for _, m in ipairs(made) do
    local def, l = m.def, lines[m.def] or { def = {}, watches = {} }
    local anchor = first(l.def)
    if not anchor and type(def) == "table" and type(def.reconcile) == "function" then
      anchor = core.check.line(def.reconcile)
    end
    local function line_of(field, watch)
      local wl = watch and l.watches[watch]
      if wl and wl[field] then return wl[field] end
      if watch then return first(wl) or l.def.watches or anchor end
      if field and l.def[field] then return l.def[field] end
      if field and type(def) == "table" and rawget(def, field) ~= nil and type(field) == "string" then
        return text_line(text, field, anchor or 1) or anchor
      end
      return anchor
    end
    for _, p in ipairs(m.problems) do add(line_of(p.field, p.watch), p.message) end
    if type(def) == "table" then
      local hook = wdef.served(def) -- (a webhook's: its kind, unless a conversion's group/Kind)
      local label = hook and "webhook." .. hook.kind or "controller " .. tostring(def.name)
      local function kind(field, spec, watch)
        local level, msg = kinds.check(catalog, spec)
        if level then
          add(watch and line_of(nil, watch) or line_of(field), ("%s: %s: %s"):format(label, field, msg),
            level == "warning", "kind " .. spec)
        end
      end
      if not (hook and hook.kind == "conversion") and (hook or not wdef.is_webhook(def)) then
        kind("resource", def.resource)
      end
      for _, k in ipairs(type(def.owns) == "table" and def.owns or {}) do
        kind("owns", type(k) == "table" and k[1] or k) -- ("v1/Pod", or { "v1/Pod", filter = ... })
      end
      for i, w in ipairs(type(def.watches) == "table" and def.watches or {}) do
        if type(w) == "table" then kind("watches", w[1], i) end
      end
    end
  end
end

-- The findings of one script, each "file:line: message" (a warning's
-- "file:line: warning: message"), and its definitions when it loads.
-- env: known (the globals the sandbox offers) and catalog (the kinds,
-- luaop.check.kinds).
function M.file(path, text, env, module)
  local chunk, err = script.compile(path, text)
  if not chunk then return { script.located(path, err) } end
  local found, at = {}, {}
  -- (a warning with a key is said once, at its first line, with how many
  -- other places it holds at)
  local function add(line, msg, warning, key)
    found[#found + 1] = { line = line, msg = msg, warning = warning, key = warning and key or nil, n = #found }
    if line and not warning then at[line] = true end
  end
  local sets = {}
  local globals = core.check.globals(chunk)
  for _, g in ipairs(globals) do
    if g.set then sets[g.name] = true end
  end
  for _, g in ipairs(globals) do
    if g.set then
      add(g.line, ("setting global %s: declare it local"):format(g.name))
    elseif sandbox.REFUSED[g.name] then
      add(g.line, ("%s is not available to luaop scripts (no %s in the sandbox)")
        :format(g.name, sandbox.REFUSED[g.name]))
    elseif not env.known[g.name] and not sets[g.name] then
      add(g.line, ("unknown global %s"):format(g.name))
    end
  end
  local wrong, kinds_used, event_calls = uses.check(core.check.uses(chunk))
  for _, w in ipairs(wrong) do add(w.line, w.message, w.warning, w.key) end
  for _, e in ipairs(uses.events(text, event_calls)) do add(e.line, e.message) end
  for _, c in ipairs(uses.clocks(text)) do add(c.line, c.message, true, "os.clock") end
  for _, k in ipairs(kinds_used) do
    local level, msg = kinds.check(env.catalog, k.kind, true)
    if level then add(k.line, ("ctx:%s: %s"):format(k.method, msg), level == "warning", "kind " .. k.kind) end
  end
  -- the top level runs all the same, every definition it makes collected
  -- with its problems rather than raised (a module's runs as the scripts
  -- that require it load)
  local made = {}
  definition.collect = function(def, problems) made[#made + 1] = { def = def, problems = problems } end
  local defs, lerr
  if module then defs = {} else defs, lerr = script.load(path, text) end
  definition.collect = nil
  if defs then
    if lerr then lerr:stop() end -- (its owner: nothing it started runs on)
  else
    -- the message, not the traceback through luaop's own frames; not a
    -- second time when it raised at a line already found at fault
    local msg = tostring(lerr):gsub("\nstack traceback:.*$", "")
    local line = tonumber(msg:sub(#path + 2):match("^(%d+):"))
    if not (line and at[line] and msg:sub(1, #path + 1) == path .. ":") then
      add(line, msg, false)
      found[#found].raw = true
    end
  end
  definitions(made, core.check.fields(chunk), text, env.catalog, add)
  table.sort(found, function(a, b)
    if (a.line or math.huge) ~= (b.line or math.huge) then return (a.line or math.huge) < (b.line or math.huge) end
    return a.n < b.n
  end)
  local kept, once = {}, {}
  for _, f in ipairs(found) do
    local one = f.key and once[f.key]
    if one then one.others = (one.others or 0) + 1 else kept[#kept + 1] = f end -- (said at its first line)
    if f.key then once[f.key] = once[f.key] or f end
  end
  local out = {}
  for _, f in ipairs(kept) do
    if f.others then
      f.msg = ("%s; %d other place%s in this script use%s it too"):format(f.msg, f.others,
        f.others == 1 and "" or "s", f.others == 1 and "s" or "")
    end
    if f.raw then out[#out + 1] = f.msg
    elseif f.line then out[#out + 1] = ("%s:%d: %s%s"):format(path, f.line, f.warning and "warning: " or "", f.msg)
    else out[#out + 1] = ("%s: %s%s"):format(path, f.warning and "warning: " or "", f.msg) end
  end
  return out, defs
end

-- Check the scripts the paths hold, with the CRDs the crds paths hold (and
-- those of manifests/ beside the scripts); print the findings; the exit
-- status.
function M.run(paths, crds)
  local findings, warnings, checked = 0, 0, 0
  local function found(msg)
    if msg:find("^[^:]*:%d+: warning: ") or msg:find("^[^:]*: warning: ") then
      warnings = warnings + 1
    else
      findings = findings + 1
    end
    io.stdout:write(msg, "\n")
  end
  local sources, err = script.sources(paths)
  local files = sources and script.files(sources) or {}
  if not sources then found(err) end
  local catalog, problems = kinds.catalog(crds, sources and kinds.default_dirs(sources) or {})
  for _, p in ipairs(problems) do found(p) end
  local env, names = { known = known_globals(), catalog = catalog }, {}
  for _, path in ipairs(files) do
    checked = checked + 1
    local text, rerr = script.read(path)
    if not text then
      found(path .. ": " .. tostring(rerr))
    else
      local out, defs = M.file(path, text, env)
      for _, msg in ipairs(out) do found(msg) end
      if defs then script_metrics.settle(path, true) end -- (its metric names: a later script's clash is found)
      for _, d in ipairs(defs or {}) do
        local w = wdef.served(d)
        local key = w and (w.kind == "conversion" and "the conversion of " .. w.group .. "/" .. w.resource_kind
          or w.path)
        if key and names[key] then
          found(("%s: webhook.%s of %s: %s is served by %s too: a path is one script's"):format(path, w.kind,
            d.resource, key, names[key]))
        end
        if key then names[key] = path end
        if type(d) == "table" and type(d.name) == "string" then
          if names[d.name] then
            found(("%s: two controllers are named %s (the other in %s)"):format(path, d.name, names[d.name]))
          end
          names[d.name] = path
        end
      end
    end
  end
  if sources and checked == 0 then found(table.concat(paths, ", ") .. ": no *.lua script to check") end
  -- the modules of the directories, checked as scripts are but not run
  local mods = sources and modules.files(sources) or {}
  for _, m in ipairs(mods) do
    local text, rerr = script.read(m.path)
    if not m.name then found(m.path .. ": " .. modules.BAD_NAME .. ": no script can require it") end
    for _, msg in ipairs(text and M.file(m.path, text, env, true) or { m.path .. ": " .. tostring(rerr) }) do
      found(msg)
    end
  end
  script_metrics.clear()
  io.stdout:flush()
  io.stderr:write(("luaop --check: %d script%s, %s%d finding%s%s\n"):format(checked, checked == 1 and "" or "s",
    #mods == 0 and "" or ("%d module%s, "):format(#mods, #mods == 1 and "" or "s"),
    findings, findings == 1 and "" or "s", warnings == 0 and "" or (", %d warning%s"):format(warnings,
    warnings == 1 and "" or "s")))
  return findings == 0 and 0 or 1
end

return M
