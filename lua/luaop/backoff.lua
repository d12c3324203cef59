-- luaop.backoff - client-go's exponential backoff manager
-- (wait.NewExponentialBackoffManager, as its reflector uses it with 800 ms,
-- 30 s, 2 minutes, factor 2, jitter 1.0): each wait is twice the last,
-- from MIN_BACKOFF to at most MAX_BACKOFF, jittered up to twice that, and
-- starts again from MIN_BACKOFF once more than BACKOFF_RESET seconds passed
-- since the last wait began (a healthy period).
--
--   b = backoff.new(params)   params: a table with MIN_BACKOFF, MAX_BACKOFF
--                             and BACKOFF_RESET (seconds), read at each wait
--   b:next(now) -> seconds to wait (now: monotonic seconds)
local M = {}
local Backoff = {}
Backoff.__index = Backoff

-- client-go's reflector's values
M.MIN_BACKOFF, M.MAX_BACKOFF, M.BACKOFF_RESET = 0.8, 30, 120

function M.new(params)
  return setmetatable({ p = params or M }, Backoff)
end

function Backoff:next(now)
  local p = self.p
  if self.last == nil or now - self.last > p.BACKOFF_RESET then
    self.delay = p.MIN_BACKOFF
  else
    self.delay = math.min(self.delay * 2, p.MAX_BACKOFF)
  end
  self.last = now
  return self.delay * (1 + math.random()) -- jitter 1.0
end

return M
