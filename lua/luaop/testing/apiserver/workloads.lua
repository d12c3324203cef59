-- luaop.testing.apiserver.workloads - the defaults kube-apiserver v1.37 gives the workload
-- kinds with a pod template (Deployment, ReplicaSet, StatefulSet, DaemonSet,
-- Job, CronJob: pkg/apis/apps/v1 and batch/v1 defaults.go, and their
-- strategies' status and annotations); a part of luaop.testing.apiserver's
-- defaults, which merges these handlers into its own (same signature:
-- function(server, obj, op, namespace, kind, old) -> nil | error message).
local core = require "luaop.core"
local json = core.json
local values_part = require "luaop.testing.apiserver.values"
local is_object, nonempty = values_part.is_object, values_part.nonempty
local podspec = require "luaop.testing.apiserver.podspec"
local obj_at, each, default, claim_spec, template =
  podspec.obj_at, podspec.each, podspec.default, podspec.claim_spec, podspec.template

local KINDS = {}

KINDS["apps/Deployment"] = function(_, obj)
  local spec = obj_at(obj, "spec")
  default(spec, "replicas", 1)
  local strategy = obj_at(spec, "strategy")
  if not nonempty(strategy.type) then strategy.type = "RollingUpdate" end
  if strategy.type == "RollingUpdate" then
    local ru = obj_at(strategy, "rollingUpdate")
    default(ru, "maxUnavailable", "25%")
    default(ru, "maxSurge", "25%")
  end
  default(spec, "revisionHistoryLimit", 10)
  default(spec, "progressDeadlineSeconds", 600)
  obj_at(obj, "status")
  local ok, err = template(obj_at(spec, "template"))
  if not ok then return err end
end

KINDS["apps/ReplicaSet"] = function(_, obj)
  local spec = obj_at(obj, "spec")
  default(spec, "replicas", 1)
  default(obj_at(obj, "status"), "replicas", 0)
  local ok, err = template(obj_at(spec, "template"))
  if not ok then return err end
end

KINDS["apps/StatefulSet"] = function(_, obj)
  local spec = obj_at(obj, "spec")
  default(spec, "replicas", 1)
  if not nonempty(spec.podManagementPolicy) then spec.podManagementPolicy = "OrderedReady" end
  local us = obj_at(spec, "updateStrategy")
  if not nonempty(us.type) then us.type = "RollingUpdate" end
  if us.type == "RollingUpdate" then
    local ru = obj_at(us, "rollingUpdate")
    default(ru, "partition", 0)
    default(ru, "maxUnavailable", 1) -- (MaxUnavailableStatefulSet, on by default from v1.35)
  end
  local retention = obj_at(spec, "persistentVolumeClaimRetentionPolicy")
  default(retention, "whenDeleted", "Retain")
  default(retention, "whenScaled", "Retain")
  default(spec, "revisionHistoryLimit", 10)
  local status = obj_at(obj, "status")
  default(status, "replicas", 0)
  default(status, "availableReplicas", 0)
  for _, claim in each(spec.volumeClaimTemplates) do
    if is_object(claim) then
      claim.apiVersion, claim.kind = "v1", "PersistentVolumeClaim"
      local ok, err = claim_spec(obj_at(claim, "spec"))
      if not ok then return err end
      local cs = obj_at(claim, "status")
      if not nonempty(cs.phase) then cs.phase = "Pending" end
    end
  end
  local ok, err = template(obj_at(spec, "template"))
  if not ok then return err end
end

KINDS["apps/DaemonSet"] = function(_, obj, op, _, _, old)
  local spec = obj_at(obj, "spec")
  local us = obj_at(spec, "updateStrategy")
  if not nonempty(us.type) then us.type = "RollingUpdate" end
  if us.type == "RollingUpdate" then
    local ru = obj_at(us, "rollingUpdate")
    default(ru, "maxUnavailable", 1)
    default(ru, "maxSurge", 0)
  end
  default(spec, "revisionHistoryLimit", 10)
  local status = obj_at(obj, "status")
  for _, f in ipairs { "currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady" } do
    default(status, f, 0)
  end
  local ok, err = template(obj_at(spec, "template"))
  if not ok then return err end
  -- the template's generation: 1, counted when the template changes, kept when left out
  local TG = "deprecated.daemonset.template.generation"
  local annotations = obj_at(obj.metadata, "annotations")
  local omd = is_object(old) and is_object(old.metadata) and old.metadata
  local was = omd and is_object(omd.annotations) and tonumber(omd.annotations[TG])
  if op == "create" then
    annotations[TG] = "1"
  elseif was then
    local changed = json.encode(spec.template) ~= json.encode(is_object(old.spec) and old.spec.template or {})
    annotations[TG] = tostring(math.tointeger(was + (changed and 1 or 0)))
  elseif annotations[TG] == nil then
    annotations[TG] = "1"
  end
end

local function job_labels(obj)
  local t = obj_at(obj_at(obj, "spec"), "template")
  local labels = is_object(t.metadata) and t.metadata.labels
  if is_object(labels) and next(labels) ~= nil and not (is_object(obj.metadata.labels)
      and next(obj.metadata.labels) ~= nil) then
    obj.metadata.labels = {}
    for key, v in pairs(labels) do obj.metadata.labels[key] = v end
  end
end

KINDS["batch/Job"] = function(_, obj, op)
  local spec = obj_at(obj, "spec")
  if spec.completions == nil and spec.parallelism == nil then spec.completions = 1 end
  default(spec, "parallelism", 1)
  default(spec, "backoffLimit", spec.backoffLimitPerIndex ~= nil and 2147483647 or 6)
  job_labels(obj)
  default(spec, "completionMode", "NonIndexed")
  default(spec, "suspend", false)
  default(spec, "podReplacementPolicy", spec.podFailurePolicy ~= nil and "Failed" or "TerminatingOrFailed")
  default(spec, "manualSelector", false)
  if op == "create" and spec.manualSelector ~= true then
    -- the strategy's generateSelector
    local uid, name = obj.metadata.uid, obj.metadata.name
    local labels = obj_at(obj_at(obj_at(spec, "template"), "metadata"), "labels")
    labels["batch.kubernetes.io/controller-uid"], labels["batch.kubernetes.io/job-name"] = uid, name
    labels["controller-uid"], labels["job-name"] = uid, name
    spec.selector = { matchLabels = { ["batch.kubernetes.io/controller-uid"] = uid } }
    job_labels(obj)
  end
  obj_at(obj, "status")
  local ok, err = template(obj_at(spec, "template"))
  if not ok then return err end
end

KINDS["batch/CronJob"] = function(_, obj)
  local spec = obj_at(obj, "spec")
  if not nonempty(spec.concurrencyPolicy) then spec.concurrencyPolicy = "Allow" end
  default(spec, "suspend", false)
  default(spec, "successfulJobsHistoryLimit", 3)
  default(spec, "failedJobsHistoryLimit", 1)
  local jt = obj_at(spec, "jobTemplate")
  obj_at(jt, "metadata")
  obj_at(obj, "status")
  local ok, err = template(obj_at(obj_at(jt, "spec"), "template"))
  if not ok then return err end
end

return KINDS
