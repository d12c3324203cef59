-- bench/creator.lua - how bench/cache.lua and bench/scale.lua make their
-- objects (require "bench.creator", run from the repository's root as
-- the benchmarks are).
local luaop = require "luaop"

local M = {}

-- 800 bytes of random base64-alphabet text, taken at a random offset of 1
-- MiB of it, made once (so gzip cannot fold objects onto each other).
local pool
function M.payload()
  if not pool then
    local abc, chunk = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", {}
    for i = 1, 1 << 20 do
      local r = math.random(1, 64)
      chunk[i] = abc:sub(r, r)
    end
    pool = table.concat(chunk)
  end
  local off = math.random(1, #pool - 800)
  return pool:sub(off, off + 799)
end

-- Run write(i) for i = from..to, 100 at once; write returns an error or
-- nil, and an error fine(err) says is fine counts as done. Returns the
-- seconds it took and the writes that failed (each logged as what).
local function each(from, to, write, fine, what)
  local next_i, failed = from - 1, 0
  local function worker()
    while next_i < to do
      next_i = next_i + 1
      local err = write(next_i)
      if err and not fine(err) then
        failed = failed + 1
        luaop.log:error(what .. " failed", { error = tostring(err) })
      end
    end
  end
  local t0, tasks = luaop.time.monotonic(), {}
  for i = 1, 100 do tasks[i] = luaop.spawn(worker) end
  for _, t in ipairs(tasks) do assert(t:wait()) end
  return luaop.time.monotonic() - t0, failed
end

-- Create object(i) for i = from..to with client c, 100 at once (one that
-- exists already counts as made), then after(made, i) when given, which
-- returns an error or nil. Returns the seconds it took and the
-- creates that failed (each logged).
function M.create(c, from, to, object, after)
  return each(from, to, function(i)
    local made, err = c:create(object(i))
    if made and after then err = after(made, i) end
    return err
  end,
    function(err) return luaop.is_error(err, "AlreadyExists") end, "create")
end

-- Delete kind's objects name_of(i) in namespace ns for i = from..to, 100
-- at once, with a grace period of 0 (a Pod on a kwok node is gone without
-- waiting); one gone already counts as deleted. Far faster than
-- the namespace controller, which deletes a namespace's objects one at a
-- time. Returns as create does.
function M.delete(c, kind, ns, from, to, name_of)
  return each(from, to, function(i)
    return select(2, c:delete(kind, name_of(i), { namespace = ns, grace_period = 0 }))
  end, function(err) return luaop.is_error(err, "NotFound") end, "delete")
end

return M
