-- at.lua - the cnat "At" operator of Programming Kubernetes: run a command
-- in a Pod at a given time.
--
--   apiVersion: cnat.programming-kubernetes.info/v1alpha1
--   kind: At
--   spec: {schedule: "2026-11-22T10:00:00Z", command: "echo YAY"}
--
-- status.phase goes PENDING -> RUNNING -> DONE: PENDING until the schedule
-- (the reconcile asks to be called again then), RUNNING once it created the
-- Pod <name>-pod, DONE when that Pod has Succeeded or Failed. An At whose
-- schedule is no real time (one the CRD's checks did not stop, from an older
-- CRD) is FAILED, with status.message and a Warning Event saying why, once.
local luaop = require "luaop"

local function pod_for(at)
  local words = {}
  for w in at.spec.command:gmatch("%S+") do words[#words + 1] = w end
  return {
    apiVersion = "v1", kind = "Pod",
    metadata = {
      name = at.metadata.name .. "-pod", namespace = at.metadata.namespace,
      labels = { app = at.metadata.name },
      -- the At controls its Pod: Pod events requeue the At (owns, below),
      -- and deleting the At deletes the Pod
      ownerReferences = { {
        apiVersion = at.apiVersion, kind = at.kind, name = at.metadata.name, uid = at.metadata.uid,
        controller = true, blockOwnerDeletion = true,
      } },
    },
    spec = {
      restartPolicy = "OnFailure",
      containers = { { name = "busybox", image = "busybox", command = words } },
    },
  }
end

-- Write the new phase through /status. The object carries its
-- resourceVersion, so a stale copy fails with Conflict: raising makes the
-- reconcile run again, from fresh state, after a backoff.
local function set_phase(ctx, at, phase, message)
  ctx.log:info("phase", { from = at.status and at.status.phase or "", to = phase })
  at.status = { phase = phase, message = message }
  local _, err = ctx:update_status(at)
  if err then error(err) end
end

return luaop.controller {
  name = "at",
  resource = "cnat.programming-kubernetes.info/v1alpha1/At",
  owns = { "v1/Pod" },

  reconcile = function(ctx, req)
    local at = ctx:get("At", req)
    if not at then return end -- deleted; its Pod goes with it
    local phase = at.status and at.status.phase or ""

    if phase == "" then
      set_phase(ctx, at, "PENDING")
      ctx:event(at, "Normal", "Scheduled", "runs " .. at.spec.command .. " at " .. at.spec.schedule)
      return -- the status update brings us back

    elseif phase == "PENDING" then
      local when, bad = luaop.time.parse(at.spec.schedule)
      if not when then
        -- retrying cannot fix it: say so once, and stop
        ctx:event(at, "Warning", "InvalidSchedule", "spec.schedule: " .. bad)
        set_phase(ctx, at, "FAILED", "spec.schedule: " .. bad)
        return
      end
      local wait = when - luaop.time.now()
      if wait > 0 then return luaop.requeue_after(wait) end
      set_phase(ctx, at, "RUNNING")

    elseif phase == "RUNNING" then
      local pod = ctx:get("Pod", req.name .. "-pod", req.namespace)
      if not pod then
        local _, err = ctx:create(pod_for(at))
        if err and err.reason ~= "AlreadyExists" then error(err) end
        if not err then
          ctx:event(at, "Normal", "PodCreated", "created pod " .. req.name .. "-pod")
        end
        return -- the Pod's events bring us back
      end
      local owner = (pod.metadata.ownerReferences or {})[1]
      if not owner or owner.uid ~= at.metadata.uid then
        -- a Pod of an earlier At of the same name, not yet collected
        error(("pod %s belongs to another At; waiting for it to go"):format(pod.metadata.name))
      end
      local p = pod.status and pod.status.phase
      if p == "Succeeded" or p == "Failed" then
        set_phase(ctx, at, "DONE")
        ctx:event(at, "Normal", "Done", "pod " .. pod.metadata.name .. " " .. p)
      end
    end
  end,
}
