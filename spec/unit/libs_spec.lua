-- hack/libs.sh on a machine that cannot reach the package mirror: it stops
-- naming the step and what to do, and leaves /etc/apt as it was (its apt
-- configuration is private, in the cache). Needs root for a network
-- namespace of its own (unshare -n); elsewhere it is pending, not passed.
local proc = require "support.proc"

local function etc_apt()
  return select(2, proc.sh("find /etc/apt -printf '%y %m %u %p %l\\n' | LC_ALL=C sort; " ..
    "find /etc/apt -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum"))
end

describe("hack/libs.sh", function()
  local can = select(2, proc.sh("id -u")):match("^0%s") and proc.sh("command -v unshare")
  local test = can and it or pending

  test("stops with a message naming the step when the package mirror is unreachable, /etc/apt untouched", function()
    local dir = select(2, proc.sh("mktemp -d")):gsub("%s+$", "")
    finally(function() proc.sh("rm -rf " .. proc.quote(dir)) end)
    local before = etc_apt()
    local code, _, err = proc.run({ "unshare", "-n", "hack/libs.sh", dir .. "/out" },
      { LUAOP_CACHE = dir .. "/cache" }, { deadline = 60 })
    assert.are.equal(1, code, err)
    assert.matches("libs: could not read Debian's source package index", err)
    assert.matches("check the network to the package mirror", err)
    assert.matches("apt: W: Failed to fetch", err)
    assert.are.equal(before, etc_apt())
    -- the private configuration it used, derived from the machine's deb entries
    assert.matches("Dir::Etc::SourceList", proc.read(dir .. "/cache/apt/apt.conf"))
  end)
end)
