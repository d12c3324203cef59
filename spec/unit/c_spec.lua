-- The C unit tests (spec/c/NAME_test.c, built by `make ctest` with ASan and
-- UBSan into build/ctest/NAME_test): each of their checks is a spec here,
-- and so is each program's clean exit.
local proc = require "support.proc"

local ls = assert(io.popen("ls spec/c/*_test.c"))
local names = {}
for path in ls:lines() do names[#names + 1] = path:match("([%w_]+)%.c$") end
ls:close()

describe("the C unit tests", function()
  for _, name in ipairs(names) do
    local bin = "build/ctest/" .. name
    -- under a deadline: a test that hangs fails here instead of hanging the suite
    local _, out = proc.sh(proc.quote(bin) .. "; echo \"exit $?\"", 60)
    describe(name, function()
      for mark, what in out:gmatch("\n?(n?o?t? ?ok) %d+ %- ([^\n]+)") do
        it(what, function()
          assert.are.equal("ok", mark, out)
        end)
      end
      it("ran every check and exited 0, with nothing from the sanitizers", function()
        assert.matches("\n1%.%.%d+\nexit 0\n$", "\n" .. out, nil, out)
        assert.is_nil(out:find("runtime error", 1, true), out)
        assert.is_nil(out:find("AddressSanitizer", 1, true), out)
      end)
    end)
  end
end)
