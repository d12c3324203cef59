-- luaop.informer.list - an informer's sync by LIST (luaop.informer): in
-- pages of 500 (client:list), or, with informer.LIST_STREAM, one unpaged
-- LIST read as it arrives (client:watch's list: its items taken apart as
-- their last bytes come, as a streamed sync's events are), so that
-- luaop decodes while the API server still sends, no page waits for the
-- one before it, and no more than 16 MiB of it is read ahead. Each item's
-- metadata is decoded for the sync and its text kept, as a watch's.
local shard = require "luaop.informer.shard"
local client = require "luaop.client"

local M = {}

-- The pages: the list's resourceVersion | nil, err.
local function paged(self, informer, seen)
  local o = self.opts
  local list, err = self.client:list(self.kind, {
    namespace = o.namespace, all_namespaces = o.namespace == nil, timeout = informer.LIST_TIMEOUT,
    label_selector = o.label_selector, field_selector = o.field_selector, shard_selector = shard.query(self),
    shard = shard.filter(self), metadata_only = o.metadata_only, texts = true, cut = self.cut,
    each_page = function(items, texts) -- (each decoded shallow, its text kept: as a watch's)
      if self.stopped then error("informer stopped", 0) end
      for i, obj in ipairs(items) do
        seen[informer.key(obj)] = true
        self:upsert(obj, nil, texts[i] or nil)
      end
    end,
  })
  if not list then return nil, err end
  return list.metadata.resourceVersion
end

-- One LIST as it arrives: its resourceVersion | nil, err.
local function streamed(self, informer, seen)
  local o = self.opts
  local w, err = self.client:watch(self.kind, {
    list = true, namespace = o.namespace, all_namespaces = o.namespace == nil, timeout = informer.LIST_TIMEOUT,
    label_selector = o.label_selector, field_selector = o.field_selector, shard_selector = shard.query(self),
    shard = shard.filter(self), metadata_only = o.metadata_only, cut = self.cut, shallow = true,
  })
  if not w then return nil, err end
  self.watching = w -- (stop() closes it)
  local md
  for typ, obj, text in w:events() do
    if typ == "ADDED" then
      seen[informer.key(obj)] = true
      self:upsert(obj, nil, text)
    elseif typ == "LIST" then
      md = obj.metadata
    end
  end
  w:close()
  self.watching = nil
  if self.stopped then error("informer stopped", 0) end
  if w.err then return nil, w.err end
  local why = type(md) ~= "table" and "no metadata" or
    (type(md.resourceVersion) ~= "string" or md.resourceVersion == "") and "no resourceVersion" or
    (md["continue"] ~= nil and md["continue"] ~= "") and "a continue token, though no page was asked for"
  if why then
    local e = client.error(0, "a LIST answered a list with " .. why)
    e.reason = "MalformedList"
    return nil, e
  end
  return md.resourceVersion
end

-- LIST everything into self's cache, marking each key in seen: the list's
-- resourceVersion | nil, err (raises when the informer is stopped meanwhile).
function M.sync(self, informer, seen)
  if informer.LIST_STREAM then return streamed(self, informer, seen) end
  return paged(self, informer, seen)
end

return M
