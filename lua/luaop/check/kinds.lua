-- luaop.check.kinds - whether a kind a script names (a definition's
-- resource, owns and watches; the first argument of ctx:get, list, patch
-- and delete) is one the API server would serve: a built-in kind of the
-- Kubernetes version luaop targets (luaop.discovery), or one a
-- CustomResourceDefinition found defines (--crds DIR, and by default a
-- manifests/ directory in a script's directory or its parent).
--
-- A kind of a built-in group, or of a group some CRD found defines, that
-- none serves is an error, with the nearest kind that is; a kind of a group
-- nothing found defines (a CRD that lives only in the cluster) is a
-- warning, which says how to declare it.
local core = require "luaop.core"
local definition = require "luaop.definition"
local discovery = require "luaop.discovery"

local fs = core.fs
local M = {}

-- The directory a path is in ("." for a bare name).
local function dirname(path)
  local d = path:match("^(.*[^/])/+[^/]*$")
  if d then return d end
  return path:sub(1, 1) == "/" and "/" or "."
end

-- The manifests/ directories beside the script sources, where CRDs are
-- looked for by default: in each source's directory, or its parent.
function M.default_dirs(sources)
  local out, seen = {}, {}
  for _, s in ipairs(sources) do
    local dir = s.dir and s.path or dirname(s.path)
    for _, d in ipairs { dir, dir == "." and ".." or dirname(dir) } do
      local m = (d == "." and "" or d .. "/") .. "manifests"
      if not seen[m] and fs.kind(m) == "directory" then
        seen[m] = true
        out[#out + 1] = m
      end
    end
  end
  return out
end

-- How far the walk of a directory for CRDs goes: MAX_DEPTH directories
-- down, MAX_FILES files read, MAX_ENTRIES entries looked at (`--crds /`
-- ends there, said as a finding).
M.MAX_DEPTH, M.MAX_FILES, M.MAX_ENTRIES = 8, 1000, 20000

-- The manifests a path holds (a file, whatever its name; or a directory's
-- *.yaml, *.yml and *.json, its subdirectories' too, hidden ones aside),
-- in sorted order, up to the limits above; and the limit that cut the
-- walk short, if one did. A link to a directory inside is not followed (a
-- link to a file is read).
local function manifest_files(path)
  local out, entries, cut, full = {}, 0, nil, false
  local function walk(dir, depth)
    local names = fs.list(dir) or {}
    table.sort(names)
    for _, name in ipairs(names) do
      if not full and entries >= M.MAX_ENTRIES then
        full, cut = true, ("more than %d entries"):format(M.MAX_ENTRIES)
      end
      if full then return end
      local p = dir .. "/" .. name
      local k = not name:match("^%.") and core.check.entry(p)
      entries = entries + 1
      if k == "link" then k = fs.kind(p) == "file" and "file" end -- (a directory's: not followed)
      if k == "directory" then
        if depth < M.MAX_DEPTH then walk(p, depth + 1)
        else cut = cut or ("directories more than %d deep"):format(M.MAX_DEPTH) end
      elseif k == "file" and (name:match("%.ya?ml$") or name:match("%.json$")) then
        if #out < M.MAX_FILES then out[#out + 1] = p
        else full, cut = true, ("more than %d manifests"):format(M.MAX_FILES) end
      end
    end
  end
  local kind = fs.kind(path)
  if kind == "file" then out[1] = path
  elseif kind == "directory" then walk(path, 0) end
  return out, cut
end

-- What the checks know: { kubernetes = "v1.37.2", entries = { {group,
-- version, kind} }, groups = { [group] = "built-in" | a CRD's file } },
-- and the problems of the --crds paths given (explicit: a path that cannot
-- be read or a file that does not parse is one; in a default directory,
-- only the CRDs count and the rest is left alone).
function M.catalog(explicit, defaults)
  local cat = { kubernetes = discovery.kubernetes, entries = {}, groups = {} }
  for _, r in ipairs(discovery.resources) do
    cat.entries[#cat.entries + 1] = { group = r.group, version = r.version, kind = r.kind }
    cat.groups[r.group] = "built-in"
  end
  local problems = {}
  local function read(path, strict)
    if strict and not fs.kind(path) then problems[#problems + 1] = ("--crds %s: cannot read it"):format(path) end
    local files, cut = manifest_files(path)
    if cut then
      problems[#problems + 1] = ("%s%s: %s: not read past them, so kinds of CRDs there are not known (give the "
        .. "directory that holds the CRDs)"):format(strict and "--crds " or "", path, cut)
    end
    for _, file in ipairs(files) do
      local docs, err = core.yaml.decode(fs.read(file) or "")
      if not docs and strict then problems[#problems + 1] = ("%s: %s"):format(file, err) end
      for _, d in ipairs(docs or {}) do
        local spec = type(d) == "table" and d.kind == "CustomResourceDefinition" and type(d.spec) == "table" and d.spec
        local names = spec and type(spec.names) == "table" and spec.names
        if names and type(spec.group) == "string" and type(names.kind) == "string" then
          cat.groups[spec.group] = cat.groups[spec.group] or file
          local versions = type(spec.versions) == "table" and spec.versions or { { name = spec.version } }
          for _, v in ipairs(versions) do
            if type(v) == "table" and type(v.name) == "string" and v.served ~= false then
              cat.entries[#cat.entries + 1] = { group = spec.group, version = v.name, kind = names.kind }
            end
          end
        end
      end
    end
  end
  for _, p in ipairs(explicit or {}) do read(p, true) end
  for _, p in ipairs(defaults or {}) do read(p, false) end
  return cat, problems
end

-- An entry as the spec form that was written: Kind, version/Kind (the core
-- group) or group/version/Kind.
local function form_of(e, parts)
  if parts == 1 then return e.kind end
  if e.group == "" then return e.version .. "/" .. e.kind end
  return e.group .. "/" .. e.version .. "/" .. e.kind
end

-- Whether the catalog serves spec: nil when it does; else "error" or
-- "warning" and what to say. A spec that is not Kind, version/Kind or
-- group/version/Kind is an error too when `form` is set (a ctx call's
-- kind), else nil (a definition's: luaop.definition refuses it).
function M.check(cat, spec, form)
  if type(spec) ~= "string" then return nil end
  local bad = definition.bad_kind(spec)
  if bad and not form then return nil end
  local parts = {}
  for p in spec:gmatch("[^/]+") do parts[#parts + 1] = p end
  if bad then
    local candidates = {}
    for _, e in ipairs(cat.entries) do
      if #parts <= 3 then candidates[#candidates + 1] = form_of(e, #parts) end
    end
    local near = definition.nearest(spec, candidates)
    return "error", ("kind %s: %s%s"):format(spec, bad, near and (" (did you mean %s?)"):format(near) or "")
  end
  local kind, version, group = parts[#parts], parts[#parts - 1], #parts == 3 and parts[1] or (#parts == 2 and "")
  local candidates = {}
  for _, e in ipairs(cat.entries) do
    if e.kind == kind and (not version or e.version == version) and (not group or e.group == group) then return nil end
    if not group or e.group == group then candidates[#candidates + 1] = form_of(e, #parts) end
  end
  if group and not cat.groups[group] then
    return "warning", ("kind %s: no CRD found defines the group %s, so it is not checked (give luaop --check the "
      .. "vendor's CRDs with --crds DIR)"):format(spec, group)
  end
  local near = definition.nearest(spec, candidates)
  if not near then -- the kind in another version of its group
    for _, e in ipairs(cat.entries) do
      if e.kind:lower() == kind:lower() and (not group or e.group == group) then near = form_of(e, #parts) break end
    end
  end
  if not group and not near then
    return "warning", ("kind %s: neither Kubernetes %s nor a CRD found serves it, so it is not checked (give luaop "
      .. "--check its CRDs with --crds DIR)"):format(spec, cat.kubernetes)
  end
  local by = (group and cat.groups[group] ~= "built-in") and ("the CRDs found of the group %s (%s)")
    :format(group, cat.groups[group]) or ("Kubernetes " .. cat.kubernetes)
  return "error", ("kind %s is not served by %s%s"):format(spec, by,
    near and (" (did you mean %s?)"):format(near) or "")
end

return M
