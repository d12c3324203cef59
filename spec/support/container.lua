-- spec/support/container.lua - run an image's own entrypoint as an OCI
-- container: the root filesystem of a buildah working container, a bundle
-- whose config.json is runc's default (`runc spec`: read-only root, no new
-- privileges) made stricter, and runc to run it. As the image says: its
-- User, Entrypoint, Cmd, Env and WorkingDir. As a Pod with a restricted
-- security context would: no capabilities at all. It shares the host's
-- network namespace, so the local control plane on 127.0.0.1 is reachable.
local json = require("luaop.core").json
local proc = require "support.proc"
local system = require "system"

local container = {}
local quote, sh, read = proc.quote, proc.sh, proc.read

-- A shell command that must succeed (within proc.sh's deadline); its output.
local function must(cmd)
  local ok, out = sh(cmd)
  if not ok then error(cmd .. " failed:\n" .. out, 2) end
  return out
end

-- The command line of buildah, as hack/image.sh runs it.
local function buildah(args) return "buildah --storage-driver=vfs " .. args end
container.buildah = buildah

local function write(path, s, mode)
  local f = assert(io.open(path, "w"))
  f:write(s)
  f:close()
  if mode then must("chmod " .. mode .. " " .. quote(path)) end
end

-- The image's configuration (OCI): User, Env, Entrypoint, Cmd, WorkingDir.
function container.config(image)
  return json.decode(must(buildah("inspect --type image " .. quote(image)))).OCIv1.config
end

local function list(t)
  local a = json.array()
  for _, v in ipairs(t or {}) do a[#a + 1] = v end
  return a
end

local seq = 0

-- Start image's entrypoint. opts: env = {"K=V", ...} added to the image's,
-- mounts = { {source =, destination =} } (read-only binds; a file or a
-- directory), name = a prefix, args = a command line instead of the image's.
-- Returns a handle: pid(), stdout(), stderr(), exited() -> code or nil,
-- exec(cmd) -> ok, output (a shell command run inside, as the same user),
-- stop() (SIGTERM, waits, returns the exit code), cleanup().
function container.start(image, opts)
  opts = opts or {}
  seq = seq + 1
  local id = ("%s-%d-%d"):format(opts.name or "luaop-spec", os.time(), seq)
  local dir = must("mktemp -d"):gsub("%s+$", "")
  local c = {}
  local wc = must(buildah("from --pull=never --name " .. quote(id) .. " " .. quote(image))):match("(%S+)%s*$")
  -- what follows may fail: then the working container and bundle go too
  local ok, err = pcall(container.setup, c, id, dir, wc, image, opts)
  if not ok then
    sh(buildah("umount " .. quote(wc)))
    sh(buildah("rm " .. quote(wc)))
    sh("rm -rf " .. quote(dir))
    error(err, 2)
  end
  return c
end

-- The bundle of container.start, the container started, the handle filled.
function container.setup(c, id, dir, wc, image, opts)
  local rootfs = must(buildah("mount " .. quote(wc))):match("(%S+)%s*$")
  local cfg = container.config(image)

  must("runc spec --bundle " .. quote(dir))
  local spec = json.decode(read(dir .. "/config.json"))
  local uid, gid = tostring(cfg.User or ""):match("^(%d+):?(%d*)$")
  assert(uid, "the image's User is not numeric: " .. tostring(cfg.User))
  spec.process.terminal = false
  spec.process.user = { uid = tonumber(uid), gid = tonumber(gid ~= "" and gid or uid) }
  local args = list(opts.args or cfg.Entrypoint)
  if not opts.args then
    for _, a in ipairs(cfg.Cmd or {}) do args[#args + 1] = a end
  end
  spec.process.args = args
  local env = list(cfg.Env)
  for _, e in ipairs(opts.env or {}) do env[#env + 1] = e end
  spec.process.env = env
  spec.process.cwd = (cfg.WorkingDir and cfg.WorkingDir ~= "") and cfg.WorkingDir or "/"
  for _, set in ipairs { "bounding", "effective", "permitted", "inheritable", "ambient" } do
    spec.process.capabilities[set] = json.array()
  end
  spec.root = { path = rootfs, readonly = true }
  spec.hostname = "luaop"
  for _, m in ipairs(opts.mounts or {}) do
    spec.mounts[#spec.mounts + 1] = { destination = m.destination, type = "bind", source = m.source,
      options = list { "rbind", "ro", "nosuid", "nodev" } }
  end
  local ns = json.array()
  for _, n in ipairs(spec.linux.namespaces) do
    if n.type ~= "network" then ns[#ns + 1] = n end
  end
  spec.linux.namespaces = ns
  write(dir .. "/config.json", json.encode(spec))

  local out, err, rc = dir .. "/stdout", dir .. "/stderr", dir .. "/rc"
  -- runc run in the background; its exit code (the container's) lands in rc
  must(("(runc run --bundle %s %s </dev/null >%s 2>%s; echo $? >%s) >/dev/null 2>&1 &"):format(
    quote(dir), quote(id), quote(out), quote(err), quote(rc)))

  function c.exited()
    local s = read(rc):match("%d+")
    return s and tonumber(s)
  end
  -- the container's init (the image's entrypoint), as the host sees it
  function c.pid()
    local ok, state = sh("runc state " .. quote(id))
    if not ok then return nil end
    local st = json.decode(state)
    return st.status == "running" and st.pid ~= 0 and st.pid or nil
  end
  function c.stdout() return read(out) end
  function c.stderr() return read(err) end
  function c.exec(cmd)
    return sh(("runc exec --user %d:%d %s sh -c %s"):format(spec.process.user.uid, spec.process.user.gid,
      quote(id), quote(cmd)))
  end
  -- SIGTERM, then wait (30 s: luaop drains for at most 30 s) for the exit code
  function c.stop()
    if c.exited() == nil then sh("runc kill " .. quote(id) .. " TERM") end
    local deadline = system.gettime() + 35
    while c.exited() == nil and system.gettime() < deadline do system.sleep(0.1) end
    local code = c.exited()
    if code == nil then sh("runc kill " .. quote(id) .. " KILL") end
    return code
  end
  -- removes the container, its working container and its bundle; raises
  -- when something is left behind
  function c.cleanup()
    if c.exited() == nil then c.stop() end
    sh("runc delete --force " .. quote(id))
    sh(buildah("umount " .. quote(wc)))
    local ok, rm_out = sh(buildah("rm " .. quote(wc)))
    sh("rm -rf " .. quote(dir))
    if not ok then error("could not remove the working container " .. wc .. ":\n" .. rm_out) end
  end
  c.id, c.bundle = id, dir
end

-- A directory of mode 0755 under a private one; files written into it for
-- the container's user must be world-readable (it is not root).
function container.scratch()
  local d = must("mktemp -d"):gsub("%s+$", "")
  must("chmod 755 " .. quote(d))
  return d, function(name, s) write(d .. "/" .. name, s, "644") end
end

container.sh, container.must, container.read = sh, must, read
return container
