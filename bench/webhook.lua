-- bench/webhook.lua MODE NS ...: the client of bench/webhook.sh, on luaop's
-- own client (--qps 0).
--
--   probe NS refused|admitted   server-side dry-run creates of an At the
--                               validating webhook refuses, until one is
--                               refused by it (the webhook configuration is
--                               in effect) or admitted (it is gone); 60 s at
--                               most
--   load NS RATE SECONDS EVERY  dry-run creates of At objects paced at RATE a
--                               second for SECONDS (open loop: request i is
--                               due at i / RATE; WORKERS tasks send them,
--                               default 256), every EVERY-th one an At the
--                               webhook refuses (its command's first word is
--                               not on the allow-list, or, alternately, its
--                               schedule is two years ahead), the others
--                               valid
--
-- load prints "requests", "seconds", "rate" (achieved: answers a second),
-- "admitted", "refused", "errors" (an answer other than the one expected:
-- any failure, a valid At refused, an invalid one admitted), "late_p99_ms"
-- (how far behind its due time the 99th percentile request was sent) and
-- the client-side latency of the answers, send to answer: "p50_ms",
-- "p99_ms", "max_ms"; the first error's text as "first_error".
local luaop = require "luaop"

local mode, ns = arg[1], arg[2]
local c = luaop.client()
local function out(name, v) print(("%s %s"):format(name, v)) end

local function iso(t) return os.date("!%Y-%m-%dT%H:%M:%SZ", t) end

-- the i-th At: valid unless every-th; the refused ones alternate between
-- the allow-list and the horizon
local function at(i, every)
  local schedule, command = iso(os.time() + 3600), "echo hello"
  local bad = every > 0 and i % every == 0
  if bad then
    if (i // every) % 2 == 0 then command = "rm -rf /" else schedule = iso(os.time() + 2 * 366 * 86400) end
  end
  return {
    apiVersion = "cnat.programming-kubernetes.info/v1alpha1", kind = "At",
    metadata = { name = ("wh-%d"):format(i), namespace = ns },
    spec = { schedule = schedule, command = command },
  }, bad
end

-- a webhook's refusal: the API server's answer to a denied review names the
-- webhook ('admission webhook "NAME" denied the request: ...')
local function refused_by_webhook(err)
  return err and err.code ~= 0 and tostring(err.message):find("denied the request", 1, true) ~= nil
end

if mode == "probe" then
  local want = arg[3]
  local deadline = luaop.time.monotonic() + 60
  while luaop.time.monotonic() < deadline do
    local obj = at(1, 1)
    local ok, err = c:create(obj, { dry_run = true })
    if want == "refused" and refused_by_webhook(err) then return 0 end
    if want == "admitted" and ok then return 0 end
    luaop.sleep(0.1)
  end
  io.stderr:write(("webhook.lua: no dry-run create %s in 60 s\n"):format(want))
  return 1
end

if mode ~= "load" then error("mode: probe or load") end

local rate, secs, every = tonumber(arg[3]), tonumber(arg[4]), tonumber(arg[5])
local workers = tonumber(os.getenv("WORKERS") or "256")
local total = math.floor(rate * secs)
local latencies, late = {}, {}
local issued, admitted, refused, errors, first_error = 0, 0, 0, 0, nil
local t0 = luaop.time.monotonic() + 0.05
local function fail(why)
  errors = errors + 1
  first_error = first_error or why
end
local function worker()
  while issued < total do
    local i = issued
    issued = i + 1
    local due = t0 + i / rate
    local wait = due - luaop.time.monotonic()
    if wait > 0 then luaop.sleep(wait) end
    local obj, bad = at(i, every)
    local sent = luaop.time.monotonic()
    late[#late + 1] = sent - due
    local ok, err = c:create(obj, { dry_run = true })
    latencies[#latencies + 1] = luaop.time.monotonic() - sent
    if ok and not bad then
      admitted = admitted + 1
    elseif not ok and bad and refused_by_webhook(err) then
      refused = refused + 1
    else
      fail(ok and "an invalid At was admitted" or tostring(err.message))
    end
  end
end
local tasks = {}
for k = 1, workers do tasks[k] = luaop.spawn(worker) end
for _, t in ipairs(tasks) do assert(t:wait()) end
local elapsed = luaop.time.monotonic() - t0

table.sort(latencies)
table.sort(late)
local function pct(list, p)
  if #list == 0 then return 0 end
  return list[math.max(1, math.ceil(p * #list))] * 1000
end
out("requests", #latencies)
out("seconds", ("%.3f"):format(elapsed))
out("rate", ("%.1f"):format(#latencies / elapsed))
out("admitted", admitted)
out("refused", refused)
out("errors", errors)
out("late_p99_ms", ("%.3f"):format(math.max(0, pct(late, 0.99))))
out("p50_ms", ("%.3f"):format(pct(latencies, 0.50)))
out("p99_ms", ("%.3f"):format(pct(latencies, 0.99)))
out("max_ms", ("%.3f"):format(pct(latencies, 1)))
if first_error then out("first_error", (first_error:gsub("\n", " "))) end
return 0
