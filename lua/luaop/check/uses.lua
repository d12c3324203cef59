-- luaop.check.uses - what `luaop --check` reads from a script's bytecode
-- beside its globals (core.check): the luaop functions and ctx methods it
-- uses, compared with what exists, and the lines where a definition's
-- fields are written.
--
-- luaop is followed as `local luaop = require "luaop"` (or an upvalue of
-- that name), ctx as a local, parameter or upvalue named ctx; other names
-- for them (`local l = luaop`) are not followed.
local context = require "luaop.context"
local definition = require "luaop.definition"
local logging = require "luaop.logging"
local sandbox = require "luaop.script.sandbox"

local M = {}

-- The methods of ctx that take a kind as their first argument.
M.KIND_METHODS = { get = true, list = true, patch = true, delete = true }

-- The roots as a script gets them: the luaop module (as the sandbox's
-- require gives it) and a reconcile context.
local function roots()
  return {
    luaop = sandbox.env().require("luaop"),
    ctx = context.new { log = logging.logger("check") },
  }
end

-- The names a value offers: its keys (as pairs gives them: a sandbox view's
-- __pairs), and for ctx and a logger, their methods (their metatables are
-- protected).
local function names_of(v, r)
  local out, seen = {}, {}
  local function add(k)
    if type(k) == "string" and not seen[k] then
      seen[k] = true
      out[#out + 1] = k
    end
  end
  if type(v) == "table" then
    for k in pairs(v) do add(k) end
  end
  local function has(k)
    local ok, f = pcall(function() return v[k] end)
    return ok and type(f) == "function"
  end
  if rawequal(v, r.ctx) then
    for _, k in ipairs(context.method_names()) do add(k) end
  elseif type(v) == "table" and has("info") and has("with") then -- a logger (ctx.log, luaop.log)
    for _, k in ipairs(logging.method_names()) do add(k) end
  end
  table.sort(out)
  return out
end

-- What the last part of a use's path is: true when it exists, false when
-- its parent is a table without it, nil when that is not known (a part
-- before it is not a table); and the parent.
local function lookup(r, root, path)
  local v, parent, n = r[root], nil, 0
  for part in path:gmatch("[^.]+") do
    if n > 0 and v == nil then return nil end -- (a part before the last is absent)
    if type(v) ~= "table" then return nil end
    n, parent = n + 1, v
    local ok, got = pcall(function() return v[part] end)
    v = ok and got or nil
  end
  return v ~= nil, parent
end

-- The finding of one use found unknown (u, its parent, written: whether it
-- is a field below another the script writes): { line =, message =,
-- warning =, key = (one finding a script for a warning's key) }. A ctx may
-- be a table of the script's own that is not luaop's reconcile context: a
-- method call near a real method is a typo (an error), any other unknown
-- read through ctx only a warning.
local function unknown(u, parent, r, deeper)
  local last = u.path:match("([^.]+)$")
  local near = definition.nearest(last, names_of(parent, r))
  local shown = u.root .. "." .. u.path
  if u.method then shown = shown:gsub("%.([^.]+)$", ":%1") end
  local what
  if u.root == "ctx" and not u.path:find(".", 1, true) then
    what = ("unknown ctx %s %s"):format(u.method and "method" or "field", u.path)
  else
    what = ("unknown %s %s"):format(u.method and "method" or deeper[shown] and "field" or "function", shown)
  end
  local mean = near and (" (did you mean %s?)"):format(u.root == "ctx" and not u.path:find(".", 1, true) and near
    or (shown:gsub("[^.:]+$", near)))
  if u.root == "luaop" or (u.method and near) then
    return { line = u.line, message = what .. (mean or "") }
  end
  return { line = u.line, warning = true, key = "ctx " .. shown,
    message = ("%s%s: if this ctx is not luaop's, rename it (only luaop's ctx is checked)"):format(what, mean or "") }
end

-- The findings of uses (core.check.uses): { {line =, message =, warning
-- = bool, key =} }, the kinds ctx's methods are given as constants: {
-- {line =, kind =, method =} }, and the lines of ctx:event calls (line ->
-- true, for M.events). What the script writes to ctx (`ctx.seen = 1`) is
-- the script's own: neither it nor reads of it are reported.
function M.check(uses)
  local r = roots()
  local out, kinds, deeper, written, known, events = {}, {}, {}, {}, {}, {}
  for _, u in ipairs(uses) do
    deeper[u.root .. "." .. (u.path:match("^(.*)%.[^.]*$") or "")] = true
    if u.set then written[u.root .. "." .. u.path] = true end
  end
  for _, u in ipairs(uses) do
    -- only the last part of a use is its to report (each shorter path is a
    -- use of its own), and only below tables
    local id = u.root .. "." .. u.path
    if not u.set and not (u.root == "ctx" and written[id]) then
      local k = known[id]
      if k == nil then
        local found, parent = lookup(r, u.root, u.path)
        k = { found = found, parent = parent }
        known[id] = k
      end
      if k.found == false then
        out[#out + 1] = unknown(u, k.parent, r, deeper)
      elseif k.found and u.root == "ctx" and u.method and M.KIND_METHODS[u.path] and u.arg then
        kinds[#kinds + 1] = { line = u.line, kind = u.arg, method = u.path }
      elseif k.found and u.root == "ctx" and u.method and u.path == "event" then
        events[u.line] = true
      end
    end
  end
  return out, kinds, events
end

-- ---- ctx:event's constant arguments ----------------------------------------
-- The bytecode says where ctx:event is called (a SELF on a ctx, at the
-- line of `event`); the arguments are read from the text at that line:
-- each one that is a single literal (a string, a number, nil, true, false)
-- is known, anything else is not checked.

-- The tokens of a chunk's text, comments left out: { {kind = "name" |
-- "string" | "number" | "op", text =, line =} }.
local function tokens(text)
  local out, i, line, n = {}, 1, 1, #text
  local function lines_in(from, to)
    local _, k = text:sub(from, to):gsub("\n", "")
    line = line + k
  end
  while i <= n do
    local c = text:sub(i, i)
    local long = text:match("^%[(=*)%[", i)
    if c == "\n" then
      line, i = line + 1, i + 1
    elseif c:match("%s") then
      i = i + 1
    elseif text:sub(i, i + 1) == "--" then
      local eq = text:match("^%[(=*)%[", i + 2)
      local e = eq and select(2, text:find("]" .. eq .. "]", i + 4 + #eq, true)) or text:find("\n", i, true)
      e = e or n
      if eq then lines_in(i, e) else e = e - 1 end
      i = e + 1
    elseif long then
      local _, e = text:find("]" .. long .. "]", i + 2 + #long, true)
      e = e or n
      out[#out + 1] = { kind = "string", text = text:sub(i, e), line = line }
      lines_in(i, e)
      i = e + 1
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n do
        local d = text:sub(j, j)
        if d == "\\" then j = j + 1 elseif d == c or d == "\n" then break end
        j = j + 1
      end
      out[#out + 1] = { kind = "string", text = text:sub(i, j), line = line }
      lines_in(i, j - 1)
      i = j + 1
    elseif c:match("[%a_]") then
      local w = text:match("^[%w_]+", i)
      out[#out + 1] = { kind = "name", text = w, line = line }
      i = i + #w
    elseif c:match("%d") or (c == "." and text:sub(i + 1, i + 1):match("%d")) then
      local w = text:match("^[%w_.]+", i)
      while w:match("[eEpP]$") and text:sub(i + #w, i + #w):match("[+-]") do
        w = w .. text:match("^[+-][%w_.]*", i + #w)
      end
      out[#out + 1] = { kind = "number", text = w, line = line }
      i = i + #w
    else
      local op = text:match("^%.%.%.", i) or text:match("^[=~<>/:.][=/<>:.]", i) or c
      if not ({ ["=="] = 1, ["~="] = 1, ["<="] = 1, [">="] = 1, ["//"] = 1, ["::"] = 1, [".."] = 1, ["<<"] = 1,
        [">>"] = 1, ["..."] = 1 })[op] then op = c end
      out[#out + 1] = { kind = "op", text = op, line = line }
      i = i + #op
    end
  end
  return out
end

-- The value of a literal argument (tokens of one argument), and whether
-- it is one.
local function literal(arg)
  if #arg ~= 1 then return nil, false end
  local t = arg[1]
  if t.kind == "name" then
    if t.text == "nil" then return nil, true end
    if t.text == "true" or t.text == "false" then return t.text == "true", true end
    return nil, false
  end
  if t.kind ~= "string" and t.kind ~= "number" then return nil, false end
  local f = load("return " .. t.text, "=literal", "t", {}) -- (one literal token: nothing runs)
  local ok, v = pcall(f or error)
  return v, ok and f ~= nil
end

-- The ctx:event calls at the lines given (line -> true, M.check's third
-- result) that text holds, each { line =, message = } when its constant
-- arguments are wrong (luaop.context's rules).
function M.events(text, at)
  local out = {}
  if next(at) == nil then return out end
  local toks = tokens(text)
  for i, t in ipairs(toks) do
    if at[t.line] and t.kind == "name" and t.text == "event" and toks[i - 1] and toks[i - 1].text == ":"
      and toks[i - 2] and toks[i - 2].text == "ctx" and toks[i + 1] and toks[i + 1].text == "(" then
      local args, arg, depth, j = {}, {}, 0, i + 2
      while toks[j] do
        local x = toks[j].text
        if toks[j].kind == "op" and depth == 0 and (x == "," or x == ")") then
          if #arg > 0 then args[#args + 1] = arg end
          arg = {}
          if x == ")" then break end
        else
          if toks[j].kind == "op" and (x == "(" or x == "{" or x == "[") then depth = depth + 1 end
          if toks[j].kind == "op" and (x == ")" or x == "}" or x == "]") then depth = depth - 1 end
          arg[#arg + 1] = toks[j]
        end
        j = j + 1
      end
      local values, known = {}, {}
      for k, a in ipairs(args) do values[k], known[k] = literal(a) end
      -- an argument left out is nil, unless the last one given may be many
      -- values (a call, ...)
      local last = args[#args] and args[#args][#args[#args]]
      local many = last and (last.text == ")" or last.text == "}" or last.text == "..."
        or (last.kind == "string" and #args[#args] > 1))
      for k = #args + 1, 5 do known[k] = not many end
      local bad = context.bad_event(values, #args, known)
      if bad then out[#out + 1] = { line = t.line, message = bad } end
    end
  end
  return out
end

-- The lines of text that read os.clock, each { line =, message = } (a
-- warning): luaop's os.clock is its monotonic clock, which the kit moves,
-- not the processor time plain Lua's says.
function M.clocks(text)
  local out = {}
  if not text:find("clock", 1, true) then return out end
  local toks = tokens(text)
  for i, t in ipairs(toks) do
    local before = toks[i - 1] and toks[i - 1].text
    if t.kind == "name" and t.text == "os" and toks[i + 1] and toks[i + 1].text == "." and toks[i + 2]
      and toks[i + 2].text == "clock" and before ~= "." and before ~= ":" then
      out[#out + 1] = { line = t.line, message = "os.clock is luaop's monotonic clock (seconds that only go forward, "
        .. "moved by the kit's clock under --test), not the processor time plain Lua's os.clock says: "
        .. "luaop.time.monotonic() says so" }
    end
  end
  return out
end

-- For each definition, the lines of its fields: { [def] = { def =
-- {name -> line}, watches = { [i] = {name -> line} } } } from
-- core.check.fields (luaop.definition.field_lines: the lines a running
-- luaop logs an unknown field at too).
function M.field_lines(fields, defs)
  local taken, out = {}, {}
  for _, d in ipairs(defs) do out[d] = definition.field_lines(fields, d, taken) end
  return out
end

return M
