-- The luaop command line: --version, --help and bad flags, for the normal
-- and the AddressSanitizer/UBSan builds.
local proc = require "support.proc"

for _, bin in ipairs { "build/luaop", "build/asan/luaop" } do
  describe(bin, function()
    it("prints its version and the versions of the libraries it links", function()
      local code, out, err = proc.run { bin, "--version" }
      assert.are.equal(0, code)
      assert.are.equal("", err)
      assert.matches("^luaop %d+%.%d+%.%d+", out)
      assert.matches("\n  Lua 5%.4%.%d+ %(core 504%)\n", out)
      assert.matches("\n  libuv 1%.%d+%.%d+\n", out)
      assert.matches("\n  libcurl %d+%.%d+%.%d+ %(OpenSSL/", out)
      assert.matches("\n  libyaml 0%.%d+%.%d+\n", out)
      assert.matches("\n  libevent 2%.1%.%d+%-stable %(the webhook server%)\n", out)
    end)

    it("prints usage on --help and -h and exits 0", function()
      for _, flag in ipairs { "--help", "-h" } do
        local code, out = proc.run { bin, flag }
        assert.are.equal(0, code)
        assert.matches("^Usage: luaop %-%-script PATH %[%-%-script PATH%.%.%.%] %[flags%]", out)
        for _, f in ipairs { "--version", "--kubeconfig", "--context", "--namespace", "--qps", "--burst", "--program",
                             "--graceful-shutdown-timeout", "--log-format", "--log-level", "--max-tasks", "--crds",
                             "--test-timeout", "--webhook-bind-address", "--webhook-cert-path", "--webhook-cert-name",
                             "--webhook-cert-key", "--enable-http2", "--metrics-secure", "--metrics-cert-path",
                             "--metrics-cert-name", "--metrics-cert-key" } do
          assert.is_truthy(out:find(f, 1, true), f)
        end
      end
    end)

    it("names an unknown flag and exits 2", function()
      local code, out, err = proc.run { bin, "--no-such-flag" }
      assert.are.equal(2, code)
      assert.are.equal("", out)
      assert.matches("unknown flag %-%-no%-such%-flag", err)
      assert.matches("luaop %-%-help", err)
    end)

    it("refuses a stray argument and exits 2", function()
      local code, _, err = proc.run { bin, "extra" }
      assert.are.equal(2, code)
      assert.matches("unexpected argument extra", err)
      code, _, err = proc.run { bin, "--script", "x.lua", "--", "extra" }
      assert.are.equal(2, code)
      assert.matches("unexpected argument extra %(arguments after %-%- are for a %-%-program%)", err)
    end)

    it("runs either scripts or one --program, not both", function()
      local code, _, err = proc.run { bin, "--script", "x.lua", "--program", "y.lua" }
      assert.are.equal(2, code)
      assert.matches("%-%-program runs one trusted file: not with %-%-script", err)
      code, _, err = proc.run { bin, "--program", "x.lua", "--program", "y.lua" }
      assert.are.equal(2, code)
      assert.matches("one %-%-program at a time", err)
    end)

    it("takes --crds only with --check, and needs a value", function()
      local code, out, err = proc.run { bin, "--crds", "manifests", "--script", "operators/" }
      assert.are.equal(2, code)
      assert.are.equal("", out)
      assert.matches("%-%-crds tells %-%-check of CRDs: only with %-%-check", err)
      code, _, err = proc.run { bin, "--check", "operators/", "--crds" }
      assert.are.equal(2, code)
      assert.matches("flag %-%-crds needs a value", err)
    end)

    it("takes --test-timeout only with --test, as a duration above 0", function()
      local code, out, err = proc.run { bin, "--test-timeout", "30s", "--script", "operators/" }
      assert.are.equal(2, code)
      assert.are.equal("", out)
      assert.matches("%-%-test%-timeout is for %-%-test", err)
      for _, bad in ipairs { "0", "-1s", "soon" } do
        code, _, err = proc.run { bin, "--test", "spec/unit/operators", "--test-timeout", bad }
        assert.are.equal(2, code, bad)
        assert.matches("%-%-test%-timeout wants a duration above 0 such as 30s or 2m, not " .. bad:gsub("%p", "%%%0"), err)
      end
    end)

    it("takes kubebuilder's webhook and secure metrics flags, and refuses --enable-http2=true: HTTP/1.1 only", function()
      local code, _, err = proc.run { bin, "--script", "x.lua", "--enable-http2=true" }
      assert.are.equal(2, code)
      assert.matches("%-%-enable%-http2=true: luaop's HTTPS server speaks HTTP/1%.1 only", err)
      for _, bad in ipairs { { "--webhook-bind-address", "9443" }, { "--webhook-bind-address", "x:y" },
                             { "--enable-http2=maybe" }, { "--metrics-secure=yes" }, { "--webhook-cert-path", "" },
                             { "--webhook-cert-name", "" }, { "--metrics-cert-key", "" } } do
        code, _, err = proc.run { bin, "--script", "x.lua", table.unpack(bad) }
        assert.are.equal(2, code, table.concat(bad, " "))
        assert.matches(bad[1]:match("^[^=]*"):gsub("%p", "%%%0"), err)
      end
    end)

    it("names a bad flag value and exits 2", function()
      local code, _, err = proc.run { bin, "--script", "x.lua", "--log-format", "xml" }
      assert.are.equal(2, code)
      assert.matches("%-%-log%-format must be text or json, not xml", err)
      code, _, err = proc.run { bin, "--script", "x.lua", "--qps", "fast" }
      assert.are.equal(2, code)
      assert.matches("%-%-qps wants a number", err)
      for flag, bads in pairs { ["--max-instructions"] = { "0", "-1", "1e9", "lots", "5Mi" },
                                ["--max-memory"] = { "0", "-1", "1.5Gi", "64MB", "" },
                                ["--max-tasks"] = { "0", "-1", "1e3", "x", "1000001", "" } } do
        for _, bad in ipairs(bads) do
          code, _, err = proc.run { bin, "--script", "x.lua", flag, bad }
          assert.are.equal(2, code, flag .. " " .. bad)
          assert.matches(flag:gsub("%p", "%%%0") .. " wants [^\n]*, not " .. bad:gsub("%p", "%%%0"), err)
        end
      end
      for _, bad in ipairs { "", "soon", "-1s", "1x", "1s2", "s", "inf", "nan", "1e400", " 1s", "0x10" } do
        code, _, err = proc.run { bin, "--script", "x.lua", "--graceful-shutdown-timeout", bad }
        assert.are.equal(2, code, bad)
        assert.matches("%-%-graceful%-shutdown%-timeout wants a duration such as 30s or 1m, not " .. bad:gsub("%p", "%%%0"), err)
      end
    end)

    it("takes controller-runtime's and component-base's leader election flags, and refuses what client-go would", function()
      local luaop = require "support.luaop"
      local function run(...)
        return proc.run { bin, "--kubeconfig", luaop.offline(), "--script", "x.lua", ... }
      end
      local code, _, err = run("--leader-elect")
      assert.are.equal(2, code)
      assert.matches("%-%-leader%-elect needs %-%-leader%-election%-id, the name of the Lease to hold", err)
      code, _, err = run("--leader-elect", "--leader-election-id", "x", "--leader-elect-lease-duration", "10s")
      assert.are.equal(2, code)
      assert.matches("%-%-leader%-elect%-lease%-duration %(10s%) must be longer than %-%-leader%-elect%-renew%-deadline %(10s%)", err)
      code, _, err = run("--leader-elect", "--leader-election-id", "x", "--leader-elect-renew-deadline", "2s")
      assert.are.equal(2, code)
      assert.matches("must be longer than 1%.2 times %-%-leader%-elect%-retry%-period %(2s%)", err)
      code, _, err = run("--leader-elect=maybe")
      assert.are.equal(2, code)
      assert.matches("%-%-leader%-elect is true or false, not maybe", err)
      code, _, err = run("--leader-elect-retry-period", "0s")
      assert.are.equal(2, code)
      assert.matches("%-%-leader%-elect%-retry%-period wants a duration above 0", err)
      -- component-base's name for the Lease: accepted; outside a cluster
      -- the namespace must be given
      code, _, err = run("--leader-elect", "--leader-elect-resource-name", "x")
      assert.are.equal(1, code)
      assert.matches("%-%-leader%-elect needs %-%-leader%-election%-namespace outside a cluster", err)
      -- off, whatever else is given
      code, _, err = proc.run { bin, "--kubeconfig", luaop.offline(), "--program", "/dev/null", "--leader-elect=false",
        "--leader-election-id", "x" }
      assert.are.equal(0, code, err)
    end)

    it("explains a kubeconfig it cannot use, naming the file", function()
      local code, _, err = proc.run { bin, "--kubeconfig", "/nonexistent/config", "--script", "x.lua" }
      assert.are.equal(1, code)
      assert.matches("cannot load the Kubernetes configuration", err)
      assert.matches("kubeconfig /nonexistent/config: No such file or directory", err)
    end)
  end)
end

describe("build/luaop under valgrind", function()
  it("runs --version and --help with no memory error and no leak", function()
    for _, flag in ipairs { "--version", "--help" } do
      local code, out, err = proc.run { "valgrind", "--quiet", "--error-exitcode=99",
                                        "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                                        "build/luaop", flag }
      assert.are.equal(0, code, err)
      assert.matches("luaop", out)
    end
  end)
end)
