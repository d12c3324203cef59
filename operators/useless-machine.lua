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
local luaop = require "luaop"

local GROUP = "useless.container.training/v1alpha1"
local DELAY = 5 -- seconds before a switch seen up is flipped; also between flips

local last_flip = {} -- machine uid -> when it last flipped a switch (this process)

-- Expectations, as the ReplicaSet controller keeps them: the cache learns
-- of our own creates and deletes a moment after they succeed (and maybe
-- after an event of the Machine that brings us back), so a switch we
-- created counts until the cache has it, and one we deleted is gone
-- already. Without this, a quick second pass would create switches twice.
local created = {} -- "namespace/name" -> {switch, expires}
local deleted = {} -- "namespace/name" -> {machine = "namespace/name", expires}
local EXPECT = 30 -- seconds to wait for the cache at most

-- Switches of a machine, oldest first (so scaling down removes the newest).
local function switches_of(ctx, machine)
  local now, list, cached = luaop.now(), {}, {}
  local ns, name = machine.metadata.namespace, machine.metadata.name
  for _, sw in ipairs(ctx:list("Switch", { namespace = ns, labels = { machine = name } })) do
    local key = sw.metadata.namespace .. "/" .. sw.metadata.name
    cached[key] = true
    created[key] = nil
    if not (deleted[key] and deleted[key].expires > now) then list[#list + 1] = sw end
  end
  for key, e in pairs(created) do
    if e.expires < now then
      created[key] = nil
    elseif not cached[key] and e.switch.metadata.labels.machine == machine.metadata.name
      and e.switch.metadata.namespace == machine.metadata.namespace then
      list[#list + 1] = e.switch
    end
  end
  local mine = machine.metadata.namespace .. "/" .. machine.metadata.name
  for key, e in pairs(deleted) do
    if e.expires < now or (e.machine == mine and not cached[key]) then deleted[key] = nil end
  end
  table.sort(list, function(a, b)
    local ta, tb = a.metadata.creationTimestamp, b.metadata.creationTimestamp
    if ta ~= tb then return ta < tb end
    return a.metadata.name < b.metadata.name
  end)
  return list
end

local function new_switch(machine)
  return {
    apiVersion = GROUP, kind = "Switch",
    metadata = {
      generateName = "switch-", namespace = machine.metadata.namespace,
      labels = { machine = machine.metadata.name },
      ownerReferences = { {
        apiVersion = GROUP, kind = "Machine", name = machine.metadata.name,
        uid = machine.metadata.uid, controller = true, blockOwnerDeletion = true,
      } },
    },
    spec = { position = "down" },
  }
end

local function check(err) if err then error(err) end end

return luaop.controller {
  name = "machine",
  resource = GROUP .. "/Machine",
  concurrency = 4, -- machines in parallel; one machine is never reconciled twice at once
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

    -- scale: create the missing switches, delete the newest extra ones
    for _ = #switches + 1, want do
      local sw, err = ctx:create(new_switch(machine))
      check(err)
      created[sw.metadata.namespace .. "/" .. sw.metadata.name] =
        { switch = sw, expires = luaop.now() + EXPECT }
      switches[#switches + 1] = sw -- counted in positions now, not on the next pass
      ctx:event(machine, "Normal", "SwitchCreated", "created switch " .. sw.metadata.name, "Create")
    end
    while #switches > want do
      local sw = table.remove(switches)
      local _, err = ctx:delete("Switch",
        { namespace = sw.metadata.namespace, name = sw.metadata.name })
      if err and err.reason ~= "NotFound" then error(err) end
      deleted[sw.metadata.namespace .. "/" .. sw.metadata.name] = {
        machine = machine.metadata.namespace .. "/" .. machine.metadata.name,
        expires = luaop.now() + EXPECT,
      }
    end

    -- flip: a switch seen up is set down DELAY s later, one per machine per DELAY s
    local now = luaop.time.now()
    local wake -- seconds until something is due
    local function due_in(s) wake = math.min(wake or s, s) end
    for _, sw in ipairs(switches) do
      if sw.spec.position ~= "down" then
        local seen = sw.status and luaop.time.parse(sw.status.seenAt)
        if not seen then
          sw.status = { seenAt = luaop.time.format(now) }
          check(select(2, ctx:update_status(sw)))
          due_in(DELAY)
        else
          local ready = math.max(seen + DELAY, (last_flip[machine.metadata.uid] or 0) + DELAY)
          if ready <= now then
            ctx.log:info("flipping switch down", { switch = sw.metadata.name })
            sw.spec.position = "down"
            check(select(2, ctx:update(sw)))
            -- the status subresource clears seenAt, from the updated object
            check(select(2, ctx:patch("Switch",
              { namespace = sw.metadata.namespace, name = sw.metadata.name },
              { status = { seenAt = luaop.null } }, { status = true })))
            last_flip[machine.metadata.uid] = now
            sw.spec.position = "down"
            ctx:event(machine, "Normal", "SwitchFlipped",
              "flipped switch " .. sw.metadata.name .. " down", "Flip")
          else
            due_in(ready - now)
          end
        end
      end
    end

    -- positions: one letter per switch, as they are now
    local letters = {}
    for i, sw in ipairs(switches) do letters[i] = sw.spec.position:sub(1, 1) end
    local positions = table.concat(letters)
    if not machine.status or machine.status.positions ~= positions then
      machine.status = { positions = positions }
      check(select(2, ctx:update_status(machine)))
    end
    if wake then return luaop.requeue_after(wake) end
  end,
}
