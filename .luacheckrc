-- .luacheckrc - luacheck (Debian's lua-check) over lua/, operators/, spec/
-- and bench/: `make lint`, and `make test` runs it (spec/run.sh).
--
-- Each directory gets the globals its code really runs with, and nothing
-- is ignored wholesale: no allow_defined, no ignore list. A finding is
-- fixed, or, where the code is right as it is, silenced on its own line
-- with an inline `-- luacheck: ignore CODE` under a comment saying why.

-- lua/ (the runtime) and bench/ (programs luaop runs, trusted: they see the
-- whole of Lua, arg included) run on plain Lua 5.4.
std = "lua54"
max_line_length = 120

-- Operator scripts run in the sandbox of lua/luaop/script/sandbox.lua, M.env():
-- exactly these globals, read-only (a script's own globals are locals or
-- errors here). Its lists, spelled out: M.BASE; M.LIBRARIES (string without
-- dump; math with the 5.3 compatibility functions luaop's Lua is built
-- with); os with only M.OS (clock, date, difftime, time: the others raise);
-- and what M.env() wraps: require, load, setmetatable, getmetatable,
-- rawset, collectgarbage, _G. Never io, debug, package, dofile, loadfile.
-- spec/unit/luacheck_spec.lua checks this list against M.env() itself.
local function fields(...) return { fields = { ... } } end
stds.luaop_script = {
  read_globals = {
    -- M.BASE
    "assert", "error", "ipairs", "next", "pairs", "pcall", "print", "rawequal", "rawget", "rawlen",
    "select", "tonumber", "tostring", "type", "xpcall", "_VERSION",
    -- M.env()'s own versions
    "require", "load", "setmetatable", "getmetatable", "rawset", "collectgarbage",
    _G = { other_fields = true },
    -- M.LIBRARIES, as read-only views
    string = fields("byte", "char", "find", "format", "gmatch", "gsub", "len", "lower", "match", "pack",
      "packsize", "rep", "reverse", "sub", "unpack", "upper"),
    table = fields("concat", "insert", "move", "pack", "remove", "sort", "unpack"),
    math = fields("abs", "acos", "asin", "atan", "atan2", "ceil", "cos", "cosh", "deg", "exp", "floor", "fmod",
      "frexp", "huge", "ldexp", "log", "log10", "max", "maxinteger", "min", "mininteger", "modf", "pi", "pow",
      "rad", "random", "randomseed", "sin", "sinh", "sqrt", "tan", "tanh", "tointeger", "type", "ult"),
    utf8 = fields("char", "charpattern", "codepoint", "codes", "len", "offset"),
    coroutine = fields("close", "create", "isyieldable", "resume", "running", "status", "wrap", "yield"),
    -- M.OS
    os = fields("clock", "date", "difftime", "time"),
  },
}

-- The operators are the examples users read and copy: 100 columns.
files["operators"] = { std = "luaop_script", max_line_length = 100 }

-- lua/: a method keeps its `:` when it needs no state of its own (one
-- calling convention across a class), so an unused implicit self is not
-- reported there (self = false; explicit unused arguments still are).
files["lua"] = { self = false }

-- Specs run under busted on Lua 5.4. A spec's title is one sentence,
-- named verbatim in docs/guarantees.md, and its assertions match whole log
-- lines: 140 columns; lines inside long strings (the scripts, shell and
-- YAML a spec writes out, exactly as they run) are not limited.
files["spec"] = { std = "lua54+busted", max_line_length = 140, max_string_line_length = false }
