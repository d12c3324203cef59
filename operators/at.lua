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
  -- the At controls its Pod: the Pod's events bring the At back (owns,
  -- below), and deleting the At deletes the Pod
  return luaop.set_controller({
    apiVersion = "v1", kind = "Pod",
    metadata = { name = at.metadata.name .. "-pod", namespace = at.metadata.namespace },
    spec = { restartPolicy = "OnFailure",
      containers = { { name = "busybox", image = "busybox", command = words } } },
  }, at)
end

-- The new phase, through /status, with a Ready condition beside it (True
-- once the Pod has run: `kubectl wait --for=condition=Ready at/NAME`). The
-- object carries its resourceVersion, so a stale copy fails with Conflict:
-- raising runs the reconcile again, from fresh state, after a backoff.
local function set_phase(ctx, at, phase, message)
  ctx.log:info("phase", { from = at.status and at.status.phase or "", to = phase })
  at.status = at.status or {}
  at.status.phase, at.status.message = phase, message
  luaop.conditions.set(at, { type = "Ready", status = phase == "DONE" and "True" or "False",
    reason = phase:sub(1, 1) .. phase:sub(2):lower(), message = message or "" })
  assert(ctx:update_status(at))
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
    elseif phase == "PENDING" then
      local when, bad = luaop.time.parse(at.spec.schedule)
      if not when then -- retrying cannot fix it: say so once, and stop
        ctx:event(at, "Warning", "InvalidSchedule", "spec.schedule: " .. bad)
        return set_phase(ctx, at, "FAILED", "spec.schedule: " .. bad)
      end
      -- not yet: come back then
      if when > luaop.time.wall() then return luaop.requeue_after(when - luaop.time.wall()) end
      set_phase(ctx, at, "RUNNING")
    elseif phase == "RUNNING" then
      local pod = ctx:get("Pod", req.name .. "-pod", req.namespace)
      if not pod then
        assert(ctx:create(pod_for(at)))
        return ctx:event(at, "Normal", "PodCreated", "created pod " .. req.name .. "-pod")
      end
      -- not a Pod of an earlier At of the same name, not yet collected (retried)
      assert((luaop.controller_of(pod) or {}).uid == at.metadata.uid, "the pod is another At's")
      local p = pod.status and pod.status.phase
      if p == "Succeeded" or p == "Failed" then
        set_phase(ctx, at, "DONE")
        ctx:event(at, "Normal", "Done", "pod " .. pod.metadata.name .. " " .. p)
      end
    end
  end,
}
