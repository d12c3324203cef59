-- useless-machine.lua - the useless machine of container.training's
-- kubebuilder workshop: a Machine has spec.switches Switches; whoever sets a
-- switch up, the operator sets it back down.
--
--   Machine  spec.switches: 3         status.positions: "dud" (a letter a switch)
--   Switch   spec.position: up|down   status.seenAt: when first seen up
--            label machine=<machine>, controlled by that Machine
--
-- The operator creates missing switches and deletes extra ones, keeps
-- positions current, and flips a switch that is not down back down 5 s
-- after it saw it, at most one switch per machine every 5 s.
--
-- The caches see this process's own writes at once (read your own
-- writes), so a quick second pass never creates a switch twice: no
-- expectations to keep.
local luaop = require "luaop"

local GROUP = "useless.container.training/v1alpha1"
local DELAY = 5 -- seconds before a switch seen up is flipped; also between flips

local last_flip = {} -- machine uid -> when it last flipped a switch (this process)

-- Switches of a machine, oldest first (so scaling down removes the newest).
local function switches_of(ctx, machine)
  local md = machine.metadata
  local list = ctx:list("Switch", { namespace = md.namespace, labels = { machine = md.name } })
  table.sort(list, function(a, b)
    local ta, tb = a.metadata.creationTimestamp, b.metadata.creationTimestamp
    if ta ~= tb then return ta < tb end
    return a.metadata.name < b.metadata.name
  end)
  return list
end

local function new_switch(machine)
  return luaop.set_controller({
    apiVersion = GROUP, kind = "Switch",
    metadata = { generateName = "switch-", namespace = machine.metadata.namespace,
      labels = { machine = machine.metadata.name } },
    spec = { position = "down" },
  }, machine)
end

-- Flip sw down if it is due; else how long until it is (nil: not up).
local function flip(ctx, machine, sw, now)
  if sw.spec.position == "down" then return nil end
  local seen = sw.status and luaop.time.parse(sw.status.seenAt)
  if not seen then
    sw.status = { seenAt = luaop.time.format(now) }
    assert(ctx:update_status(sw))
    return DELAY
  end
  local ready = math.max(seen + DELAY, (last_flip[machine.metadata.uid] or 0) + DELAY)
  if ready > now then return ready - now end
  ctx.log:info("flipping switch down", { switch = sw.metadata.name })
  sw.spec.position = "down"
  sw = assert(ctx:update(sw))
  -- seenAt goes with it: the status subresource, from the updated object
  sw.status = {}
  assert(ctx:update_status(sw))
  last_flip[machine.metadata.uid] = now
  local note = "flipped switch " .. sw.metadata.name .. " down"
  ctx:event(machine, "Normal", "SwitchFlipped", note, "Flip")
  return nil
end

return luaop.controller {
  name = "machine",
  resource = GROUP .. "/Machine",
  concurrency = 64, -- machines at once; one machine is never reconciled twice at once
  owns = { GROUP .. "/Switch" },
  -- a switch names its machine by label too (as in the workshop), so a
  -- switch labelled by hand, without an owner reference, counts as well
  watches = { { GROUP .. "/Switch", map = function(sw)
    local m = sw.metadata.labels and sw.metadata.labels.machine
    return m and { { namespace = sw.metadata.namespace, name = m } } or {}
  end } },

  reconcile = function(ctx, req)
    local machine = ctx:get("Machine", req)
    if not machine then return end -- deleted: the garbage collector takes its switches
    local want = machine.spec.switches
    local switches = switches_of(ctx, machine)
    -- scale: create the missing switches at once (one round trip for all,
    -- not one each), delete the newest extra ones
    local creates = {}
    for i = 1, want - #switches do
      creates[i] = luaop.spawn(ctx.create, ctx, new_switch(machine))
    end
    for _, t in ipairs(creates) do
      local _, sw, err = assert(t:wait())
      switches[#switches + 1] = assert(sw, err)
      ctx:event(machine, "Normal", "SwitchCreated", "created switch " .. sw.metadata.name, "Create")
    end
    while #switches > want do
      assert(ctx:delete(table.remove(switches)))
    end
    -- flip: a switch seen up is set down DELAY s later, one per machine per DELAY s
    local now, wake = luaop.time.wall(), nil
    for _, sw in ipairs(switches) do
      local due = flip(ctx, machine, sw, now)
      if due then wake = math.min(wake or due, due) end
    end
    -- positions: one letter per switch, as they are now
    local letters = {}
    for i, sw in ipairs(switches) do letters[i] = sw.spec.position:sub(1, 1) end
    if not machine.status or machine.status.positions ~= table.concat(letters) then
      machine.status = { positions = table.concat(letters) }
      assert(ctx:update_status(machine))
    end
    if wake then return luaop.requeue_after(wake) end
  end,
}
