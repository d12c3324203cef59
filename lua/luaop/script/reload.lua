-- luaop.script.reload - scripts reloaded when their files change: a new
-- version is loaded beside the old; if it does not load, raises at its top
-- level, or returns no valid definition, the old version keeps serving and
-- the error (file, line, message) is logged, counted and, in a Pod, an Event.
local core = require "luaop.core"
local time = require "luaop.time"
local logging = require "luaop.logging"
local events = require "luaop.events"
local script = require "luaop.script"
local modules = require "luaop.script.modules"
local supervisor = require "luaop.supervisor"

local fs = core.fs

local M = {}

-- How long a directory must be quiet before its scripts are loaded again.
M.DEBOUNCE = 0.02

local Reloader = {}
Reloader.__index = Reloader

function M.reloader(sources, manager)
  return setmetatable({
    sources = sources, manager = manager, loaded = {}, failed = {},
    reloads = { success = 0, error = 0 }, log = logging.logger("script"),
  }, Reloader)
end

-- luaop_script_reloads_total{script, result}, charged to the script's
-- metrics account (it goes with the script)
local function count_reload(self, path, result)
  core.metrics.series("luaop_script_reloads_total", { path, result }, self.manager:account(path)):add()
end

-- In a Pod (POD_NAME and POD_NAMESPACE from the downward API, as the
-- manifests set them): a Warning Event on the Pod, for `kubectl events`.
local function warn_pod(path, err)
  local pod, ns = os.getenv("POD_NAME"), os.getenv("POD_NAMESPACE")
  if not pod or not ns then return end
  events.record {
    regarding = { apiVersion = "v1", kind = "Pod", metadata = { name = pod, namespace = ns } },
    type = "Warning", reason = "ScriptLoadFailed", action = "Load", controller = "scripts",
    note = path .. ": " .. tostring(err):match("^[^\n]*"),
  }
end

function Reloader:fail(path, err)
  self.reloads.error = self.reloads.error + 1
  count_reload(self, path, "error")
  warn_pod(path, err)
  self.log:error("script reload failed, the running version stays", {
    script = path, error = tostring(err),
  })
end

-- Bring the manager in line with the files: load what is new or changed,
-- stop what is gone. On the first scan (first = true) every failure is
-- returned; later ones are logged, counted, and leave the old version.
function Reloader:scan(first)
  local present = {}
  local failures = {}
  local files, ferr = script.files(self.sources)
  if not files then
    if first then return nil, ferr end
    self.log:error("cannot read the scripts' directory; everything stays as it is", { error = ferr })
    return self:retry_later()
  end
  for _, path in ipairs(files) do
    present[path] = true
    local text, rerr = script.read(path)
    local cur = self.loaded[path]
    if not text then
      failures[#failures + 1] = path .. ": " .. tostring(rerr)
      if not first then self:fail(path, rerr) end
    elseif (not cur or cur.text ~= text or modules.changed(cur.used)) and not self:failed_as(path, text) then
      -- (a script is loaded again when a module it uses changed too)
      local changed = cur and cur.text == text and table.concat(modules.changes(cur.used), ",") or nil
      local t0 = time.monotonic()
      local defs, err, used = script.load(path, text)
      local ok, set_failed
      if defs then
        local owner = err
        ok, err = self.manager:set(path, defs, owner)
        -- not the script's fault (a cache that did not sync yet, a name
        -- another script still holds): try again later, same text or not
        set_failed = not ok
        if not ok then owner:stop() end -- what its top level started ends
      end
      if ok then
        self.failed[path] = nil
        local names, served = {}, require("luaop.webhook.definition").served
        for _, d in ipairs(defs) do names[#names + 1] = d.name or served(d).path end
        self.loaded[path] = { text = text, names = names, used = used }
        if not first then
          self.reloads.success = self.reloads.success + 1
          count_reload(self, path, "success")
          self.log:info(cur and "script reloaded" or "script loaded", {
            script = path, controllers = table.concat(names, ","), modules = changed,
            ms = math.floor((time.monotonic() - t0) * 1000 + 0.5),
          })
        end
      else
        if not set_failed then self.failed[path] = { text = text, used = used } end
        failures[#failures + 1] = tostring(err)
        if not first then
          self:fail(path, err)
          if set_failed then self:retry_later() end
        end
      end
    end
  end
  for path in pairs(self.loaded) do
    if not present[path] then
      self.manager:set(path, {})
      self.loaded[path] = nil
      self.failed[path] = nil
      self.reloads.success = self.reloads.success + 1
      self.manager:drop_account(path) -- its series, its reload counts among them
      self.log:info("script removed, its controllers stopped", { script = path })
    end
  end
  for path in pairs(self.failed) do -- one that never loaded, gone
    if not present[path] then
      self.failed[path] = nil
      self.manager:drop_account(path)
    end
  end
  if #failures > 0 then return nil, table.concat(failures, "\n") end
  return true
end

-- Whether the script at path failed to load as it is now: its text and
-- its modules' (nothing to try again until one of them changes).
function Reloader:failed_as(path, text)
  local f = self.failed[path]
  return f and f.text == text and not modules.changed(f.used)
end

-- Scan again in a while (what failed may have been transient).
M.RETRY = 5
function Reloader:retry_later()
  if self.retrying then return end
  self.retrying = true
  core.task.spawn(function()
    core.task.sleep(M.RETRY)
    self.retrying = false
    self.pending = true
    if self.wake then self.wake:signal() end
  end)
end

-- The directories to watch: each directory source, and the directory of
-- each file source.
function Reloader:dirs()
  local out, seen = {}, {}
  for _, s in ipairs(self.sources) do
    local d = s.dir and s.path or (s.path:match("^(.*)/[^/]*$") or ".")
    if d == "" then d = "/" end
    if not seen[d] then
      seen[d] = true
      out[#out + 1] = d
    end
  end
  return out
end

-- Watch the sources and rescan after each quiet change, until stopped.
function Reloader:watch()
  local changed = core.task.cond()
  self.watchers = {}
  for _, d in ipairs(self:dirs()) do
    local w, err = fs.watch(d)
    if not w then
      self.log:error("cannot watch scripts, reloading is off for them", { directory = d, error = err })
    else
      self.watchers[#self.watchers + 1] = w
      core.task.spawn(function()
        while w:wait() do
          -- debounce: until nothing changed for a while
          repeat core.task.sleep(M.DEBOUNCE) until not w:take()
          self.pending = true
          changed:signal()
        end
      end)
    end
  end
  local function done() return self.stopped end
  supervisor.spawn("reloader", { name = "scripts", done = done }, function()
    while not self.stopped do
      if not self.pending then changed:wait() end
      if self.stopped then break end
      self.pending = false
      local ok, err = pcall(self.scan, self, false)
      if not ok then self.log:error("reloading scripts failed", { error = tostring(err) }) end
    end
  end)
  self.wake = changed
end

function Reloader:stop()
  self.stopped = true
  for _, w in ipairs(self.watchers or {}) do w:close() end
  if self.wake then self.wake:signal() end
end

return M
