-- secret-copy.lua - the secret copier of the TGI Kubernetes demo: Secrets of
-- type k8s.ziwon.dev/secretsync in namespace secretsync are copied into
-- every other namespace, and kept so.
--
-- Copies are created or updated when the source changes, put back when
-- someone edits (drift) or deletes one, made in namespaces created later, and
-- removed when the source goes. Owner references cannot cross namespaces,
-- so copies carry a label naming their source, and a finalizer on the
-- source (luaop adds it, and calls finalize when the source is deleted)
-- gives the operator the chance to remove them before it goes.
local luaop = require "luaop"

local SOURCE_NAMESPACE = "secretsync"
local TYPE = "k8s.ziwon.dev/secretsync"
local EXCLUDED = { ["kube-system"] = true, ["kube-public"] = true, ["kube-node-lease"] = true }
local SOURCE_LABEL = "secretsync.k8s.ziwon.dev/source" -- on copies: the source's name

local SOURCES = { namespace = SOURCE_NAMESPACE, field_selector = "type=" .. TYPE }
local COPIES = { label_selector = SOURCE_LABEL }

local function source_request(name) return { namespace = SOURCE_NAMESPACE, name = name } end

-- Every copy of source `name`, in any namespace.
local function copies_of(ctx, name)
  return ctx:list("Secret",
    { label_selector = COPIES.label_selector, labels = { [SOURCE_LABEL] = name } })
end

-- Remove every copy of source `name` (src: the source, still there, or nil).
local function remove_copies(ctx, name, src)
  for _, copy in ipairs(copies_of(ctx, name)) do
    local where = copy.metadata.namespace
    ctx.log:info("deleting copy", { copy = where .. "/" .. copy.metadata.name })
    assert(ctx:delete(copy))
    if src then
      ctx:event(src, "Normal", "CopyRemoved", "removed the copy in " .. where, "Delete")
    end
  end
end

local function wanted_copy(src, namespace)
  return {
    apiVersion = "v1", kind = "Secret", type = src.type,
    metadata = {
      name = src.metadata.name, namespace = namespace,
      labels = { [SOURCE_LABEL] = src.metadata.name },
    },
    data = src.data or {},
  }
end

local function same(a, b) return luaop.json.encode(a or {}) == luaop.json.encode(b or {}) end

return luaop.controller {
  name = "secret-copy",
  resource = "v1/Secret",
  namespace = SOURCES.namespace,
  field_selector = SOURCES.field_selector,
  watches = {
    -- a new namespace needs every source
    { "v1/Namespace", map = function(_, ctx)
      local reqs = {}
      for _, src in ipairs(ctx:list("Secret", SOURCES)) do
        reqs[#reqs + 1] = source_request(src.metadata.name)
      end
      return reqs
    end },
    -- a copy that drifts or goes away brings its source back
    { "v1/Secret", label_selector = COPIES.label_selector, map = function(copy)
      return { source_request(copy.metadata.labels[SOURCE_LABEL]) }
    end },
  },

  -- the source is being deleted: remove the copies, then luaop lets it go
  finalizer = "secretsync.k8s.ziwon.dev/copies",
  finalize = function(ctx, src) remove_copies(ctx, src.metadata.name, src) end,

  reconcile = function(ctx, req)
    local src = ctx:get("Secret", req)
    if not src then return remove_copies(ctx, req.name) end -- gone (its finalizer removed by hand)
    local existing = {}
    for _, copy in ipairs(copies_of(ctx, req.name)) do existing[copy.metadata.namespace] = copy end
    for _, ns in ipairs(ctx:list("Namespace")) do
      local name = ns.metadata.name
      local live = not (ns.status and ns.status.phase == "Terminating")
      if name ~= SOURCE_NAMESPACE and not EXCLUDED[name] and live then
        local want, copy = wanted_copy(src, name), existing[name]
        if not copy then
          ctx.log:info("creating copy", { copy = name .. "/" .. req.name })
          local _, err = ctx:create(want) -- AlreadyExists: its watch event is on its way
          if err and err.reason ~= "AlreadyExists" then error(err) end
          if not err then
            ctx:event(src, "Normal", "CopyCreated", "copied into " .. name, "Create")
          end
        elseif copy.type ~= want.type then -- the type cannot change: replace it
          assert(ctx:delete(copy))
          return luaop.requeue()
        elseif not same(copy.data, want.data) then
          ctx.log:info("updating copy", { copy = name .. "/" .. req.name })
          copy.data = want.data
          assert(ctx:update(copy)) -- Conflict: retried from fresh state
          ctx:event(src, "Normal", "CopyUpdated", "updated the copy in " .. name, "Update")
        end
      end
    end
  end,
}
