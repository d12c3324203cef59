-- at-webhooks.lua - webhooks for at.lua's At: a validation the CRD's
-- schema cannot express, and the conversion between its two versions.
--
--   v1alpha1 (stored): spec {schedule, command}
--   v1alpha2:          spec {runAt, command}   (schedule renamed)
--
-- The API server calls the validation with the At in v1alpha1 (the
-- configuration's matchPolicy Equivalent converts it first), so one
-- validation serves both versions.
local luaop = require "luaop"

-- The commands an At may run: the first word of spec.command.
local ALLOWED = { echo = true, date = true, sleep = true, ["true"] = true, env = true }
local YEAR = 365 * 24 * 3600

local validate = luaop.webhook.validating {
  resource = "cnat.programming-kubernetes.info/v1alpha1/At",
  validate = function(req, res)
    if req.operation == "DELETE" then return end -- (an At going away: nothing to check)
    local spec = req.object.spec or {}
    local first = (spec.command or ""):match("^%s*(%S+)") or ""
    if not ALLOWED[first] then
      return false, ("spec.command: %q is not an allowed command (allowed: %s)"):format(first,
        "date, echo, env, sleep, true")
    end
    -- (the schema refused a schedule that does not parse)
    local when = luaop.time.parse(spec.schedule or "")
    if when and when > luaop.time.wall() + YEAR then
      return false, ("spec.schedule: %s is more than a year ahead"):format(spec.schedule)
    end
    if when and when < luaop.time.wall() then
      res:warn("spec.schedule is in the past: the At runs at once")
    end
  end,
}

-- Only the field's name differs: each version's spec is the other's with
-- it renamed; metadata and status go through as they are.
local convert = luaop.webhook.conversion {
  resource = "cnat.programming-kubernetes.info/At",
  convert = function(at, version)
    local spec = at.spec or {}
    if version == "v1alpha2" then
      spec.runAt, spec.schedule = spec.schedule, nil
    elseif version == "v1alpha1" then
      spec.schedule, spec.runAt = spec.runAt, nil
    else
      error("no such version of At: " .. version)
    end
    return at
  end,
}

return { validate, convert }
