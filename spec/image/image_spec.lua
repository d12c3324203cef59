-- luaop's image (opt-in: `make test-image`, which builds it first): it
-- runs luaop, as a non-root user, with only what luaop needs at run time.
local image = os.getenv("LUAOP_IMAGE") or "luaop:latest"

local function sh(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  return ok, out
end

local function b(args) return sh("buildah --storage-driver=vfs " .. args) end

describe("the luaop image", function()
  it("runs luaop --version", function()
    local ok, c = b("from --pull=never " .. image)
    assert(ok, c)
    c = c:match("(%S+)%s*$")
    finally(function() b("rm " .. c) end)
    local ran, out = b("run --isolation=chroot " .. c .. " -- /usr/local/bin/luaop --version")
    assert(ran, out)
    assert.matches("^luaop %S+\n  Lua 5%.4", out)
    assert.matches("libcurl %S+ %(OpenSSL", out)
  end)

  it("runs as a non-root user, scripts from /etc/luaop/operators", function()
    local _, user = b("inspect --type image --format '{{.OCIv1.Config.User}}' " .. image)
    assert.are.equal("65532:65532", user:match("%S+"))
    local _, cmd = b("inspect --type image --format '{{.OCIv1.Config.Entrypoint}} {{.OCIv1.Config.Cmd}}' " .. image)
    assert.matches("%[/usr/local/bin/luaop%] %[%-%-script /etc/luaop/operators%]", cmd)
  end)

  it("holds no compiler or headers", function()
    local ok, c = b("from --pull=never " .. image)
    assert(ok, c)
    c = c:match("(%S+)%s*$")
    finally(function() b("rm " .. c) end)
    local _, out = b("run --isolation=chroot " .. c .. " -- sh -c 'command -v cc gcc make; ls /usr/include 2>/dev/null | wc -l'")
    assert.matches("^0%s*$", out)
  end)
end)
