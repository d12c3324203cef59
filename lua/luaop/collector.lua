-- luaop.collector - the garbage collector's cycle finished when the process
-- goes quiet.
--
-- Lua's collector advances only as Lua allocates: a process that goes
-- quiet after a burst of work (a sync and its reconciles, a reload) keeps
-- that burst's garbage until the next burst, and with it the memory
-- (src/gcmem.c gives pages back only at the end of a cycle). Once a second
-- this looks at the heap: when it barely moved in that second (quiet) but
-- is above what the last finished cycle left, it finishes a cycle in small
-- steps, yielding between them, so no task waits behind a whole
-- collection; the cycle's end gives the pages back.
local core = require "luaop.core"
local listing = require("luaop.informer").listing
local supervisor = require "luaop.supervisor"

local M = {}

local PERIOD = 1       -- seconds between looks
local QUIET = 256      -- KiB allocated or freed in a period, at most, to be quiet
local SLACK = 512      -- KiB above the last cycle's heap before a cycle is worth it
local STEP = 64        -- the work of one step (collectgarbage "step" units: KiB)
local MAX_STEPS = 4096 -- steps in one look at most

-- Start the watcher in a task of its own; it ends when stopped() is true.
-- Returns the task.
function M.start(stopped)
  return supervisor.spawn("collector", { done = stopped }, function()
    local floor = collectgarbage("count")
    local last = floor
    while not stopped() do
      core.task.sleep(PERIOD)
      -- the end-of-cycle sentinel again, if a task past its memory budget
      -- ran the last one's finalizer (src/gcmem.c)
      core.gcmem_rearm()
      local now = collectgarbage("count")
      -- (not while an informer lists: the collector is generational then,
      -- and a generational step never ends a cycle)
      if listing() == 0 and math.abs(now - last) <= QUIET and now > floor * 1.1 + SLACK then
        -- quiet, with garbage likely: finish the cycle under way, at most
        -- MAX_STEPS steps (its whole heap is far fewer)
        local steps = 0
        repeat
          local done = collectgarbage("step", STEP)
          steps = steps + 1
          if not done then core.task.sleep(0) end
        until done or stopped() or listing() > 0 or steps >= MAX_STEPS
        now = collectgarbage("count")
        floor = now
      end
      floor = math.min(floor, now)
      last = now
    end
  end)
end

return M
