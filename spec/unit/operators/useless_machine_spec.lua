-- operators/useless-machine.lua's contract (DESIGN.md), with the test kit:
-- no cluster, no sleeps; 5 s delays pass on the kit's clock.
local testing = require "luaop.testing"

local GROUP = "useless.container.training/v1alpha1"

describe("operators/useless-machine.lua", function()
  local env
  before_each(function()
    env = testing.env {
      script = "operators/useless-machine.lua", manifests = { "manifests/crds" }, time = "2026-11-25T10:00:00Z",
    }
  end)
  after_each(function() if env then env:stop() end end)

  local function machine(name, switches)
    return { apiVersion = GROUP, kind = "Machine", metadata = { name = name, namespace = "default" },
      spec = { switches = switches } }
  end

  local function switches(name)
    return env:list("Switch", "default", { machine = name })
  end

  local function positions(name)
    local m = env:get("Machine", name)
    return m.status and m.status.positions
  end

  -- Set a switch's position as a user would.
  local function set(sw, position)
    sw.spec.position = position
    return assert(env:update(sw))
  end

  it("creates the missing switches (switch-*, labelled, controlled by the machine), all down, each once", function()
    local m = env:create(machine("m", 3))
    local list = switches("m")
    assert.are.equal(3, #list)
    for _, sw in ipairs(list) do
      assert.matches("^switch%-%w+$", sw.metadata.name)
      assert.are.equal("down", sw.spec.position)
      local ref = sw.metadata.ownerReferences[1]
      assert.are.same({ "Machine", "m", m.metadata.uid, true }, { ref.kind, ref.name, ref.uid, ref.controller })
    end
    assert.are.equal("ddd", positions("m"))
    -- no expectations needed: its own writes are in its cache at once, so
    -- however many times it ran meanwhile, exactly three creates
    assert.are.equal(3, #env:actions { verb = "create", kind = "Switch" })
    env:advance(600)
    assert.are.equal(3, #env:actions { verb = "create", kind = "Switch" })
  end)

  it("scales up and down, deleting the newest switches", function()
    env:create(machine("s", 2))
    local first = switches("s")
    env:advance(1)
    local m = env:get("Machine", "s")
    m.spec.switches = 4
    assert(env:update(m))
    assert.are.equal(4, #switches("s"))
    m = env:get("Machine", "s")
    m.spec.switches = 2
    assert(env:update(m))
    local left = {}
    for _, sw in ipairs(switches("s")) do left[#left + 1] = sw.metadata.name end
    local oldest = { first[1].metadata.name, first[2].metadata.name }
    table.sort(oldest)
    table.sort(left)
    assert.are.same(oldest, left)
    assert.are.equal("dd", positions("s"))
  end)

  it("flips a switch set up back down 5 s after it saw it, keeping positions current on the way", function()
    env:create(machine("f", 3))
    local sw = set(switches("f")[2], "up")
    assert.are.equal("dud", positions("f"))
    local seen = env:get("Switch", sw.metadata.name)
    assert.are.equal("2026-11-25T10:00:00Z", seen.status.seenAt)
    env:advance(4.9)
    assert.are.equal("up", env:get("Switch", sw.metadata.name).spec.position)
    env:advance(0.2)
    local flipped = env:get("Switch", sw.metadata.name)
    assert.are.equal("down", flipped.spec.position)
    assert.is_nil(flipped.status.seenAt)
    assert.are.equal("ddd", positions("f"))
  end)

  it("flips at most one switch per machine every 5 s", function()
    env:create(machine("r", 3))
    for _, sw in ipairs(switches("r")) do set(sw, "up") end
    assert.are.equal("uuu", positions("r"))
    local downs = {}
    for t = 1, 16 do
      env:advance(1)
      downs[t] = select(2, positions("r"):gsub("d", ""))
    end
    -- one at 5 s, the next 5 s later, the last 5 s after that
    assert.are.same({ 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3 }, downs)
  end)

  it("counts a switch labelled for it by hand, without an owner", function()
    env:create(machine("l", 1))
    env:advance(1) -- a second later: the newer of the two
    assert(env:create { apiVersion = GROUP, kind = "Switch",
      metadata = { name = "by-hand", namespace = "default", labels = { machine = "l" } }, spec = { position = "up" } })
    -- two switches for one wanted: the newest (the hand-made one) goes
    assert.is_nil(env:get("Switch", "by-hand"))
    assert.are.equal(1, #switches("l"))
  end)

  it("retries a Conflict quietly and converges with no switch doubled", function()
    env:fail { verb = "update", kind = "Machine", subresource = "status", reason = "Conflict", times = 3 }
    env:create(machine("c", 3))
    env:advance(5)
    assert.are.equal(3, #switches("c"))
    assert.are.equal("ddd", positions("c"))
    assert.are.equal(3, #env:actions { verb = "create", kind = "Switch" })
  end)

  it("leaves the switches to the garbage collector when the machine goes", function()
    env:create(machine("g", 2))
    env:clear_actions()
    assert(env:delete("Machine", { namespace = "default", name = "g" }))
    assert.are.equal(0, #switches("g"))
    assert.are.same({}, env:actions { verb = "delete" })
  end)
end)
