-- luaop.testing.apiserver: the in-memory API server of the test kit, request by
-- request as kube-apiserver answers (statuses, bodies, errors worded as
-- its), its watches (in tasks, on this process's loop: core.kit.run), and
-- luaop's own client and informer pointed at it.
local core = require "luaop.core"
local apiserver = require "luaop.testing.apiserver"
local luaop = require "support.luaop"

local json = core.json
local T = 1800000000 -- 2027-01-15T08:00:00Z
local STAMP = "2027-01-15T08:00:00Z"

local AT_CRD = {
  apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
  metadata = { name = "ats.cnat.programming-kubernetes.info" },
  spec = {
    group = "cnat.programming-kubernetes.info", scope = "Namespaced",
    names = { kind = "At", listKind = "AtList", plural = "ats", singular = "at" },
    versions = { { name = "v1alpha1", served = true, storage = true, subresources = { status = {} } } },
  },
}
local ATS = "/apis/cnat.programming-kubernetes.info/v1alpha1/namespaces/default/ats"
local CMS = "/api/v1/namespaces/default/configmaps"

local function new(opts)
  opts = opts or {}
  local s = apiserver.new { now = opts.now or function() return T end, seed = 7 }
  if opts.crd ~= false then s:add_crd(AT_CRD) end
  return s
end

-- A request whose body may be a table; returns the status and the decoded answer.
local function call(s, method, path, body, ctype)
  if type(body) == "table" then body = json.encode(body) end
  local code, text = s:request(method, path, body, ctype)
  return code, json.decode(text)
end

local function cm(name, extra)
  local obj = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = name }, data = { a = "1" } }
  for k, v in pairs(extra or {}) do obj[k] = v end
  return obj
end

local function at(name, extra)
  local obj = { apiVersion = "cnat.programming-kubernetes.info/v1alpha1", kind = "At",
    metadata = { name = name }, spec = { schedule = "2027-01-15T09:00:00Z", command = "echo hi" } }
  for k, v in pairs(extra or {}) do obj[k] = v end
  return obj
end

-- Run fn in a task and the loop until nothing is ready; fn's results.
local function in_task(fn)
  local res
  core.task.spawn(function() res = table.pack(pcall(fn)) end)
  core.kit.run()
  assert(res, "the task still waits once all is idle")
  assert(res[1], res[2])
  return table.unpack(res, 2, res.n)
end

-- A consumer of watch w in a task of its own: got() -> the events so far
-- ({type, name, rv} each, or {ended = status or true}).
local function consume(w)
  local got = {}
  core.task.spawn(function()
    while true do
      local line, status, body = w:next()
      if not line then
        got[#got + 1] = { ended = status or true, body = body and json.decode(body) }
        return
      end
      local ev = json.decode(line)
      got[#got + 1] = { type = ev.type, name = ev.object.metadata.name, rv = ev.object.metadata.resourceVersion,
        object = ev.object }
    end
  end)
  core.kit.run()
  return function()
    core.kit.run()
    return got
  end
end

local function types(events)
  local out = {}
  for i, e in ipairs(events) do out[i] = e.ended and "END" or e.type .. " " .. e.name end
  return out
end

describe("luaop.apiserver", function()
  describe("discovery", function()
    it("lists core kinds (pods/status for /status), groups with their preferred version, a group version's kinds; 404s the rest",
      function()
      local s = new()
      local code, list = call(s, "GET", "/api/v1")
      assert.are.equal(200, code)
      assert.are.equal("APIResourceList", list.kind)
      local by = {}
      for _, r in ipairs(list.resources) do by[r.name] = r end
      assert.are.same({ "Pod", true }, { by.pods.kind, by.pods.namespaced })
      assert.are.same({ "Namespace", false }, { by.namespaces.kind, by.namespaces.namespaced })
      assert.are.same({ "get", "patch", "update" }, by["pods/status"].verbs)
      assert.is_not_nil(by["nodes/status"])
      assert.is_nil(by["configmaps/status"])
      assert.is_true(json.is_array(by.configmaps.verbs))

      local _, groups = call(s, "GET", "/apis")
      assert.are.equal("APIGroupList", groups.kind)
      local preferred = {}
      for _, g in ipairs(groups.groups) do preferred[g.name] = g.preferredVersion.groupVersion end
      assert.are.equal("apps/v1", preferred.apps)
      assert.are.equal("coordination.k8s.io/v1", preferred["coordination.k8s.io"])
      assert.are.equal("events.k8s.io/v1", preferred["events.k8s.io"])
      assert.are.equal("cnat.programming-kubernetes.info/v1alpha1", preferred["cnat.programming-kubernetes.info"])

      code, list = call(s, "GET", "/apis/cnat.programming-kubernetes.info/v1alpha1")
      assert.are.equal(200, code)
      assert.are.same({ "ats", "ats/status" }, { list.resources[1].name, list.resources[2].name })
      assert.are.same({ 404, 404, 404 }, { (call(s, "GET", "/apis/nope.example/v1")), (call(s, "GET", "/apis/apps/v9")),
        (call(s, "GET", "/api/v1/namespaces/default/widgets")) })
    end)

    it("prefers a group's GA version over beta over alpha, and serves only served versions", function()
      local s = new { crd = false }
      s:add_crd {
        apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
        metadata = { name = "widgets.example.com" },
        spec = { group = "example.com", scope = "Cluster", names = { kind = "Widget", plural = "widgets" },
          versions = { { name = "v1alpha1", served = true }, { name = "v1beta2", served = true },
            { name = "v1", served = true, storage = true, subresources = { status = {} } },
            { name = "v2alpha1", served = false } } },
      }
      local _, g = call(s, "GET", "/apis/example.com")
      assert.are.equal("example.com/v1", g.preferredVersion.groupVersion)
      local versions = {}
      for i, v in ipairs(g.versions) do versions[i] = v.version end
      assert.are.same({ "v1", "v1beta2", "v1alpha1" }, versions)
      local _, v1 = call(s, "GET", "/apis/example.com/v1")
      local _, beta = call(s, "GET", "/apis/example.com/v1beta2")
      assert.are.equal(2, #v1.resources)  -- widgets, widgets/status
      assert.are.equal(1, #beta.resources) -- no status there
      assert.is_false(v1.resources[1].namespaced)
      assert.are.equal(404, (call(s, "GET", "/apis/example.com/v2alpha1")))
    end)
  end)

  describe("kinds", function()
    local discovery = require "luaop.discovery"
    local function stored(r)
      for _, v in ipairs { "create", "get", "list", "watch" } do
        local found = false
        for _, w in ipairs(r.verbs) do found = found or w == v end
        if not found then return false end
      end
      return true
    end
    local function gv_path(r) return r.group == "" and "/api/" .. r.version or "/apis/" .. r.group .. "/" .. r.version end

    it("serves every stored resource of luaop.discovery with its scope, short names, verbs and status; leaves the virtual out",
      function()
      local s = new { crd = false }
      local served, left = 0, {}
      for _, r in ipairs(discovery.resources) do
        local code, list = call(s, "GET", gv_path(r))
        assert.are.equal(stored(r) and 200 or code, code, gv_path(r)) -- (a group version of virtual ones alone: 404)
        local by = {}
        for _, e in ipairs(list.resources or {}) do by[e.name] = e end
        local e = by[r.resource]
        if stored(r) then
          served = served + 1
          assert.is_not_nil(e, r.kind)
          assert.are.same({ r.kind, r.namespaced, r.verbs }, { e.kind, e.namespaced, e.verbs })
          assert.are.same(r.short_names, e.shortNames or {})
          local has_status = false
          for _, sub in ipairs(r.subresources) do has_status = has_status or sub == "status" end
          assert.are.equal(has_status, by[r.resource .. "/status"] ~= nil, r.kind .. "/status")
          -- and its objects can be made and read back at its scope
          local base = gv_path(r) .. (r.namespaced and "/namespaces/default/" or "/") .. r.resource
          local obj = { apiVersion = r.group == "" and r.version or r.group .. "/" .. r.version, kind = r.kind,
            metadata = { name = "x" .. served } }
          if r.kind ~= "CustomResourceDefinition" then -- (a CRD needs a valid spec: add_crd's specs)
            assert.are.equal(201, (call(s, "POST", base, obj)), r.kind)
            local got_code, got = call(s, "GET", base .. "/x" .. served)
            assert.are.same({ 200, r.kind }, { got_code, got.kind })
          end
        else
          assert.is_nil(e, r.kind .. " is virtual")
          left[#left + 1] = r.kind
        end
      end
      assert.is_true(served >= 50, served .. " served")
      table.sort(left)
      assert.are.same({ "Binding", "ComponentStatus", "LocalSubjectAccessReview", "SelfSubjectAccessReview",
        "SelfSubjectReview", "SelfSubjectRulesReview", "SubjectAccessReview", "TokenReview" }, left)
    end)

    it("keeps the behaviours of the API server's strategies on the kinds from discovery, and refuses a verb not listed",
      function()
      local s = new { crd = false }
      local _, ns = call(s, "POST", "/api/v1/namespaces", { apiVersion = "v1", kind = "Namespace", metadata = { name = "team" } })
      assert.are.same({ "Active", "team" }, { ns.status.phase, ns.metadata.labels["kubernetes.io/metadata.name"] })
      local _, secret = call(s, "POST", "/api/v1/namespaces/default/secrets", { apiVersion = "v1", kind = "Secret",
        metadata = { name = "s" } })
      assert.are.equal("Opaque", secret.type)
      local code, quota = call(s, "POST", "/api/v1/namespaces/team/resourcequotas", { apiVersion = "v1",
        kind = "ResourceQuota", metadata = { name = "q" }, spec = { hard = { pods = "10" } },
        status = { used = { pods = "1" } } })
      assert.are.same({ 201, {} }, { code, quota.status })  -- status only through /status (an empty struct)
      assert.are.equal(200, (call(s, "GET", "/api/v1/namespaces/team/resourcequotas/q/status")))
      assert.are.equal(404, (call(s, "GET", "/api/v1/namespaces/team/limitranges/q/status"))) -- none listed
      -- Namespaces have no deletecollection in discovery: 405 as the API server answers
      local del_code, status = call(s, "DELETE", "/api/v1/namespaces")
      assert.are.same({ 405, "MethodNotAllowed" }, { del_code, status.reason })
      assert.are.equal(200, (call(s, "DELETE", "/api/v1/namespaces/team/resourcequotas")))
      -- a non-preferred version serves the preferred one's objects
      assert.are.equal(201, (call(s, "POST", "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
        { apiVersion = "autoscaling/v2", kind = "HorizontalPodAutoscaler", metadata = { name = "h" } })))
      local _, v1 = call(s, "GET", "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/h")
      assert.are.same({ "autoscaling/v1", "h" }, { v1.apiVersion, v1.metadata.name })
    end)

    it("names RBAC's objects by path segment (system:...), the other kinds by DNS subdomain", function()
      local s = new { crd = false }
      local function create(path, kind, name)
        local api = path:match("^/apis/([^/]+/[^/]+)") or "v1"
        return call(s, "POST", path, { apiVersion = api, kind = kind, metadata = { name = name } })
      end
      local RBAC = "/apis/rbac.authorization.k8s.io/v1/"
      assert.are.equal(201, (create(RBAC .. "clusterroles", "ClusterRole", "system:aggregate-to-luaop")))
      assert.are.equal(201, (create(RBAC .. "namespaces/default/rolebindings", "RoleBinding", "a:b@C")))
      local code, status = create(RBAC .. "clusterrolebindings", "ClusterRoleBinding", "50%")
      assert.are.same({ 422, "metadata.name" }, { code, status.details.causes[1].field })
      assert.matches("may not contain '%%'", status.message)
      code, status = create(RBAC .. "namespaces/default/roles", "Role", "..")
      assert.are.equal(422, code)
      assert.matches("may not be '%.%.'", status.message)
      assert.are.equal(422, (create(CMS, "ConfigMap", "system:x")))
    end)

    it("keeps each server's kinds its own: a CRD served by one is not by another", function()
      local a, b = new(), new { crd = false }
      assert.is_not_nil((a:resolve_kind("At")))
      assert.is_nil((b:resolve_kind("At")))
      assert.are.equal(404, (call(b, "GET", "/apis/cnat.programming-kubernetes.info/v1alpha1")))
      local _, groups = call(b, "GET", "/apis")
      for _, g in ipairs(groups.groups) do assert.are_not.equal("cnat.programming-kubernetes.info", g.name) end
    end)

    it("writes a built-in group version's discovery once for every server, and anew for one whose kinds changed",
      function()
      local function kinds(s, path)
        local code, list = call(s, "GET", path or "/api/v1")
        assert.are.equal(200, code)
        local out = {}
        for _, r in ipairs(list.resources) do out[r.name] = true end
        return out
      end
      local a, b = new { crd = false }, new { crd = false }
      assert.is_true(kinds(a).configmaps)
      -- a kind added to the core group of one server: only that one serves it
      b:add_kind { version = "v1", kind = "Widget", resource = "widgets" }
      assert.is_true(kinds(b).widgets)
      assert.is_true(kinds(b).configmaps)
      assert.is_nil(kinds(a).widgets)
      assert.is_nil(kinds(new { crd = false }).widgets)
      -- and a version added to a built-in group: only that server lists it
      local function versions(s)
        local out = {}
        for _, v in ipairs(select(2, call(s, "GET", "/apis/apps")).versions) do out[#out + 1] = v.version end
        return table.concat(out, " ")
      end
      b:add_kind { group = "apps", version = "v9", kind = "Gizmo", resource = "gizmos" }
      assert.are.same({ "v9 v1", "v1" }, { versions(b), versions(a) }) -- (v9 sorts first)
      -- a CRD in a built-in group version, made and deleted through the
      -- API: served with the built-in kinds, then gone
      local crd = json.decode(json.encode(AT_CRD))
      crd.metadata.name, crd.spec.group = "gadgets.apps", "apps"
      crd.spec.names = { kind = "Gadget", plural = "gadgets", singular = "gadget", listKind = "GadgetList" }
      crd.spec.versions[1].name = "v1"
      local c = new { crd = false }
      assert.is_nil(kinds(c, "/apis/apps/v1").gadgets)
      assert.are.equal(201, (call(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)))
      assert.is_true(kinds(c, "/apis/apps/v1").gadgets)
      assert.are.equal(200, (call(c, "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.apps")))
      assert.is_nil(kinds(c, "/apis/apps/v1").gadgets)
      assert.is_true(kinds(c, "/apis/apps/v1").deployments)
      assert.is_nil(kinds(a, "/apis/apps/v1").gadgets)
    end)

    it("resolve_kind finds Kind, version/Kind and group/version/Kind as luaop's client does, CRDs' kinds too", function()
      local s = new()
      local function gvk(spec)
        local k, err = s:resolve_kind(spec)
        assert.is_nil(err)
        return k.gv .. "/" .. k.kind .. " " .. k.resource .. " " .. tostring(k.namespaced)
      end
      assert.are.equal("v1/ConfigMap configmaps true", gvk("ConfigMap"))
      assert.are.equal("v1/ConfigMap configmaps true", gvk("v1/ConfigMap"))
      assert.are.equal("apps/v1/Deployment deployments true", gvk("Deployment"))
      assert.are.equal("v1/ResourceQuota resourcequotas true", gvk("ResourceQuota"))
      assert.are.equal("v1/Event events true", gvk("Event")) -- the core group first
      assert.are.equal("events.k8s.io/v1/Event events true", gvk("events.k8s.io/v1/Event"))
      assert.are.equal("autoscaling/v2/HorizontalPodAutoscaler horizontalpodautoscalers true",
        gvk("HorizontalPodAutoscaler")) -- the group's preferred version
      assert.are.equal("autoscaling/v1/HorizontalPodAutoscaler horizontalpodautoscalers true",
        gvk("autoscaling/v1/HorizontalPodAutoscaler"))
      assert.are.equal("cnat.programming-kubernetes.info/v1alpha1/At ats true", gvk("At"))
      assert.are.equal("cnat.programming-kubernetes.info/v1alpha1/At ats true",
        gvk("cnat.programming-kubernetes.info/v1alpha1/At"))
    end)

    it("resolve_kind names a kind it does not serve, offers the closest served one, and points at the list", function()
      local s = new()
      local function miss(spec)
        local k, err = s:resolve_kind(spec)
        assert.is_nil(k, spec)
        assert.is_truthy(err:find(('does not serve kind "%s"'):format(spec), 1, true), err)
        assert.is_truthy(err:find("docs/testing.md#kinds-the-kit-serves", 1, true), err)
        return err:match('Did you mean "([^"]*)"%?') or false
      end
      assert.are.equal("apps/v1/Deployment", miss("apps/v1/Deployments"))  -- a plural
      assert.are.equal("Deployment", miss("deployment"))                   -- the case
      assert.are.equal("Deployment", miss("deployments"))                  -- the resource
      assert.are.equal("apps/v1/Deployment", miss("v1/Deployment"))        -- the wrong group
      assert.are.equal("apps/v1/Deployment", miss("apps/v1beta1/Deployment")) -- the wrong version
      assert.are.equal("Secret", miss("Secrte"))                           -- a typo
      assert.are.equal("NetworkPolicy", miss("NetworkPolicys"))
      assert.are.equal("ConfigMap", miss("cm"))                            -- a short name
      assert.are.equal("At", miss("Ats"))                                  -- a CRD's kind
      assert.is_false(miss("Widget"))                                      -- nothing close
      local _, err = s:resolve_kind("TokenReview")
      assert.matches("virtual", err)
      _, err = s:resolve_kind("a/b/c/d")
      assert.matches('bad kind "a/b/c/d"', err)
      assert.is_nil((s:resolve_kind("")))
      assert.is_nil((s:resolve_kind(nil)))
      -- the test's own reads say the same
      local ok, raised = pcall(s.objects, s, "ResourceQuotas")
      assert.is_false(ok)
      assert.matches('Did you mean "ResourceQuota"%?', raised)
    end)
  end)

  describe("create", function()
    it("fills uid, resourceVersion (one increasing counter), creationTimestamp, generation, and answers 201", function()
      local s = new()
      local code, a = call(s, "POST", CMS, cm("a"))
      assert.are.equal(201, code)
      local md = a.metadata
      assert.matches("^%x%x%x%x%x%x%x%x%-%x%x%x%x%-4%x%x%x%-[89ab]%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$", md.uid)
      assert.are.same({ "default", STAMP }, { md.namespace, md.creationTimestamp })
      assert.is_nil(md.generation) -- a ConfigMap has none, as on a cluster; a kind with a spec has 1 (an At, below)
      local _, b = call(s, "POST", CMS, cm("b"))
      assert.are.equal(tonumber(md.resourceVersion) + 1, tonumber(b.metadata.resourceVersion))
      assert.are_not.equal(md.uid, b.metadata.uid)
      local _, got = call(s, "GET", CMS .. "/a")
      assert.are.same(a, got)
      assert.are.equal(s:resource_version(), b.metadata.resourceVersion)
    end)

    it("names from generateName (five of k8s' random characters), again on a clash", function()
      local s = new()
      local code, a = call(s, "POST", CMS, { apiVersion = "v1", kind = "ConfigMap", metadata = { generateName = "job-" } })
      assert.are.equal(201, code)
      assert.matches("^job%-[bcdfghjklmnpqrstvwxz2456789]+$", a.metadata.name)
      assert.are.equal(9, #a.metadata.name)
      local tries = { "clash", "clash", "fresh" }
      s._suffix = function() return table.remove(tries, 1) end
      call(s, "POST", CMS, cm("x-clash"))
      code, a = call(s, "POST", CMS, { apiVersion = "v1", kind = "ConfigMap", metadata = { generateName = "x-" } })
      assert.are.equal(201, code)
      assert.are.equal("x-fresh", a.metadata.name)
    end)

    it("refuses what the API server refuses, in its words", function()
      local s = new()
      local code, st = call(s, "POST", "/api/v1/namespaces/nope/configmaps", cm("a"))
      assert.are.same({ 404, "NotFound", 'namespaces "nope" not found' }, { code, st.reason, st.message })
      assert.are.same({ name = "nope", kind = "namespaces" }, st.details)
      assert.are.same({ "Status", "Failure", 404 }, { st.kind, st.status, st.code })

      local other = cm("a")
      other.metadata.namespace = "kube-system"
      code, st = call(s, "POST", CMS, other)
      assert.are.same({ 400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request" },
        { code, st.reason, st.message })

      code, st = call(s, "POST", CMS, { apiVersion = "v1", kind = "ConfigMap", metadata = {} })
      assert.are.same({ 422, "Invalid", 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required' },
        { code, st.reason, st.message })
      assert.are.same({ field = "metadata.name", reason = "FieldValueRequired",
        message = "Required value: name or generateName is required" }, st.details.causes[1])

      code, st = call(s, "POST", CMS, cm("Bad_Name"))
      assert.are.equal(422, code)
      assert.matches('^ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 '
        .. "subdomain", st.message)

      local labelled = cm("l")
      labelled.metadata.labels = { ["app"] = "2027-01-15T08:00:00Z", ["bad key"] = "v", ["a/b/c"] = "" }
      code, st = call(s, "POST", CMS, labelled)
      assert.are.equal(422, code)
      assert.are.equal(3, #st.details.causes)
      assert.matches('^ConfigMap "l" is invalid: %[metadata.labels: Invalid value: "a/b/c": a qualified name must', st.message)
      assert.matches('metadata.labels: Invalid value: "2027%-01%-15T08:00:00Z": a valid label must be an empty string',
        st.message)
      assert.matches('metadata.labels: Invalid value: "bad key": name part must consist of alphanumeric', st.message)

      local owners = cm("o")
      owners.metadata.ownerReferences = { { apiVersion = "v1", kind = "ConfigMap", name = "p1", uid = "1", controller = true },
        { apiVersion = "v1", kind = "ConfigMap", name = "p2", uid = "2", controller = true }, { kind = "X", name = "n" } }
      code, st = call(s, "POST", CMS, owners)
      assert.are.equal(422, code)
      local fields = {}
      for i, c in ipairs(st.details.causes) do fields[i] = c.field end
      assert.are.same({ "metadata.ownerReferences.apiVersion", "metadata.ownerReferences.uid", "metadata.ownerReferences" },
        fields)
      assert.matches('Only one reference can have Controller set to true. Found "true" in references for ConfigMap/p1 '
        .. "and ConfigMap/p2%]$", st.message)

      call(s, "POST", ATS, at("x"))
      code, st = call(s, "POST", ATS, at("x"))
      assert.are.same({ 409, "AlreadyExists", 'ats.cnat.programming-kubernetes.info "x" already exists' },
        { code, st.reason, st.message })
      assert.are.same({ name = "x", group = "cnat.programming-kubernetes.info", kind = "ats" }, st.details)

      code, st = call(s, "POST", CMS, { apiVersion = "apps/v1", kind = "ConfigMap", metadata = { name = "v" } })
      assert.are.same({ 400, "the API version in the data (apps/v1) does not match the expected API version (v1)" },
        { code, st.message })
      local with_rv = cm("rv")
      with_rv.metadata.resourceVersion = "3"
      code, st = call(s, "POST", CMS, with_rv)
      assert.are.same({ 500, "InternalError" }, { code, st.reason })
      assert.are.equal(405, (call(s, "POST", "/api/v1/configmaps", cm("everywhere"))))
      code, st = call(s, "POST", CMS, "{not json")
      assert.are.same({ 400, "BadRequest" }, { code, st.reason })
    end)

    it("drops status on create for kinds with /status (a Pod starts Pending), keeps it for others", function()
      local s = new()
      local _, a = call(s, "POST", ATS, at("x", { status = { phase = "DONE" } }))
      assert.is_nil(a.status)
      local _, pod = call(s, "POST", "/api/v1/namespaces/default/pods",
        { apiVersion = "v1", kind = "Pod", metadata = { name = "p" }, spec = {}, status = { phase = "Running" } })
      assert.are.same({ phase = "Pending", qosClass = "BestEffort" }, pod.status)
      local _, ns = call(s, "POST", "/api/v1/namespaces", { apiVersion = "v1", kind = "Namespace", metadata = { name = "n1" } })
      assert.are.same({ phase = "Active" }, ns.status)
      assert.are.same({ "kubernetes" }, ns.spec.finalizers)
      assert.are.equal("n1", ns.metadata.labels["kubernetes.io/metadata.name"])
      local _, sec = call(s, "POST", "/api/v1/namespaces/default/secrets",
        { apiVersion = "v1", kind = "Secret", metadata = { name = "s" } })
      assert.are.equal("Opaque", sec.type)
    end)

    it("with dryRun=All answers as a create would and stores nothing", function()
      local s = new()
      local rv = s:resource_version()
      local code, a = call(s, "POST", CMS .. "?dryRun=All&fieldManager=t", cm("dry"))
      assert.are.equal(201, code)
      assert.are.equal("dry", a.metadata.name)
      assert.is_not_nil(a.metadata.uid)
      assert.are.equal(rv, s:resource_version())
      assert.are.equal(404, (call(s, "GET", CMS .. "/dry")))
      assert.is_true(s:actions()[1].dry_run)
    end)
  end)

  describe("get and list", function()
    local function names(list)
      local out = {}
      for i, item in ipairs(list.items) do out[i] = item.metadata.name end
      return out
    end

    local function labelled(s)
      for name, labels in pairs { a = { app = "web", tier = "front" }, b = { app = "web", tier = "back" },
                                  c = { app = "db" }, d = json.null } do
        local obj = cm(name)
        if labels ~= json.null then obj.metadata.labels = labels end
        call(s, "POST", CMS, obj)
      end
    end

    it("filters by label selector as labels.Parse reads it", function()
      local s = new()
      labelled(s)
      local cases = {
        ["app=web"] = { "a", "b" }, ["app==web"] = { "a", "b" }, ["app!=web"] = { "c", "d" },
        ["app in (web,db)"] = { "a", "b", "c" }, ["app notin (web)"] = { "c", "d" }, ["tier"] = { "a", "b" },
        ["!tier"] = { "c", "d" }, ["app=web,tier=back"] = { "b" }, ["app in (web), !tier"] = {},
        [""] = { "a", "b", "c", "d" },
      }
      for sel, want in pairs(cases) do
        local code, list = call(s, "GET", CMS .. "?labelSelector=" .. sel:gsub("[^%w]", function(c)
          return ("%%%02X"):format(c:byte()) end) .. "&limit=500")
        assert.are.equal(200, code, sel)
        assert.are.same(want, names(list), sel)
      end
      local code, st = call(s, "GET", CMS .. "?labelSelector=app%3D%3D%3Dx")
      assert.are.same({ 400, "BadRequest" }, { code, st.reason })
      assert.matches("^unable to parse requirement", st.message)
    end)

    it("answers a List of the kind, at the current resourceVersion, in one namespace or all", function()
      local s = new()
      labelled(s)
      call(s, "POST", "/api/v1/namespaces/kube-system/configmaps", cm("z"))
      local _, list = call(s, "GET", CMS)
      assert.are.same({ "v1", "ConfigMapList", s:resource_version() },
        { list.apiVersion, list.kind, list.metadata.resourceVersion })
      assert.is_nil(list.metadata["continue"])
      assert.is_nil(list.items[1].apiVersion) -- built-in items carry no apiVersion, as the API server's
      assert.are.equal(4, #list.items)
      _, list = call(s, "GET", "/api/v1/configmaps")
      assert.are.equal(5, #list.items)
      local _, ats = call(s, "GET", ATS)
      assert.are.same({ "AtList" }, { ats.kind })
      assert.is_true(json.is_array(ats.items))
      assert.are.equal("[]", json.encode(ats.items))
      call(s, "POST", ATS, at("x"))
      _, ats = call(s, "GET", ATS)
      assert.are.equal("cnat.programming-kubernetes.info/v1alpha1", ats.items[1].apiVersion)
      local code, st = call(s, "GET", CMS .. "/nope")
      assert.are.same({ 404, 'configmaps "nope" not found' }, { code, st.message })
    end)

    it("filters by field selector: metadata.name and .namespace, a Secret's type, a Pod's phase and node; others are refused", function()
      local s = new()
      labelled(s)
      call(s, "POST", "/api/v1/namespaces/kube-system/configmaps", cm("a"))
      local _, list = call(s, "GET", "/api/v1/configmaps?fieldSelector=metadata.name%3Da")
      assert.are.equal(2, #list.items)
      _, list = call(s, "GET", "/api/v1/configmaps?fieldSelector=metadata.name%3Da,metadata.namespace!%3Ddefault")
      assert.are.same({ "kube-system" }, { list.items[1].metadata.namespace, list.items[2] })
      _, list = call(s, "GET", CMS .. "?fieldSelector=metadata.name%3D%3Db")
      assert.are.same({ "b" }, names(list))

      call(s, "POST", "/api/v1/namespaces/default/secrets",
        { apiVersion = "v1", kind = "Secret", metadata = { name = "tls" }, type = "kubernetes.io/tls" })
      call(s, "POST", "/api/v1/namespaces/default/secrets", { apiVersion = "v1", kind = "Secret", metadata = { name = "o" } })
      _, list = call(s, "GET", "/api/v1/namespaces/default/secrets?fieldSelector=type%3DOpaque")
      assert.are.same({ "o" }, names(list))

      for _, p in ipairs { { "p1", "n1" }, { "p2", "n2" } } do
        s:seed { apiVersion = "v1", kind = "Pod", metadata = { name = p[1] }, spec = { nodeName = p[2] },
          status = { phase = p[1] == "p1" and "Running" or "Pending" } }
      end
      _, list = call(s, "GET", "/api/v1/pods?fieldSelector=status.phase%3DRunning")
      assert.are.same({ "p1" }, names(list))
      _, list = call(s, "GET", "/api/v1/pods?fieldSelector=spec.nodeName!%3Dn1")
      assert.are.same({ "p2" }, names(list))

      local code, st = call(s, "GET", "/api/v1/pods?fieldSelector=spec.foo%3Dx")
      assert.are.same({ 400, "BadRequest", "field label not supported: spec.foo" }, { code, st.reason, st.message })
      code, st = call(s, "GET", CMS .. "?fieldSelector=data.a%3D1")
      assert.are.same({ 400, '"data.a" is not a known field selector: only "metadata.name", "metadata.namespace"' },
        { code, st.message })
      code, st = call(s, "GET", ATS .. "?fieldSelector=spec.command%3Dx")
      assert.are.same({ 400, "field label not supported: spec.command" }, { code, st.message })
      code, st = call(s, "GET", CMS .. "?fieldSelector=metadata.name")
      assert.are.same({ 400, "invalid selector: 'metadata.name'; can't understand 'metadata.name'" }, { code, st.message })
    end)
  end)

  describe("update", function()
    it("needs the stored resourceVersion (409 Conflict), or none for built-in kinds; a custom resource needs one", function()
      local s = new()
      local _, a = call(s, "POST", ATS, at("x"))
      local stale = json.decode(json.encode(a))
      a.spec.command = "echo 2"
      local code = call(s, "PUT", ATS .. "/x", a)
      assert.are.equal(200, code)
      local b
      code, b = call(s, "PUT", ATS .. "/x", stale)
      assert.are.same({ 409, "Conflict",
        'Operation cannot be fulfilled on ats.cnat.programming-kubernetes.info "x": the object has been modified; '
          .. "please apply your changes to the latest version and try again" }, { code, b.reason, b.message })
      assert.are.same({ name = "x", group = "cnat.programming-kubernetes.info", kind = "ats" }, b.details)
      stale.metadata.resourceVersion = nil
      code, b = call(s, "PUT", ATS .. "/x", stale)
      assert.are.same({ 422, 'At.cnat.programming-kubernetes.info "x" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
        .. "must be specified for an update" }, { code, b.message })

      call(s, "POST", CMS, cm("c"))
      code, b = call(s, "PUT", CMS .. "/c", cm("c", { data = { a = "2" } }))
      assert.are.same({ 200, "2" }, { code, b.data.a })
      assert.are.equal(404, (call(s, "PUT", CMS .. "/nope", cm("nope"))))
      code, b = call(s, "PUT", CMS .. "/c", cm("d"))
      assert.are.same({ 400, "the name of the object (d) does not match the name on the URL (c)" }, { code, b.message })
    end)

    it("keeps status on a PUT of the object and changes only status through /status; generation counts spec changes", function()
      local s = new()
      local _, a = call(s, "POST", ATS, at("x"))
      assert.are.equal(1, a.metadata.generation)
      a.status = { phase = "RUNNING" }
      a.metadata.labels = { l = "1" }
      local _, b = call(s, "PUT", ATS .. "/x", a)
      assert.is_nil(b.status)                 -- ignored
      assert.are.equal("1", b.metadata.labels.l)
      assert.are.equal(1, b.metadata.generation) -- metadata only
      assert.are.equal(tonumber(a.metadata.resourceVersion) + 1, tonumber(b.metadata.resourceVersion))

      b.status = { phase = "RUNNING" }
      b.spec.command = "ignored through status"
      b.metadata.labels = { l = "ignored" }
      local code, c = call(s, "PUT", ATS .. "/x/status", b)
      assert.are.equal(200, code)
      assert.are.same({ "RUNNING", "echo hi", "1", 1 }, { c.status.phase, c.spec.command, c.metadata.labels.l,
        c.metadata.generation })

      c.spec.command = "echo 2"
      local _, d = call(s, "PUT", ATS .. "/x", c)
      assert.are.same({ 2, "RUNNING" }, { d.metadata.generation, d.status.phase })

      -- a NetworkPolicy (no /status): any change outside metadata counts
      local NPS = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies"
      local _, n = call(s, "POST", NPS, { apiVersion = "networking.k8s.io/v1", kind = "NetworkPolicy",
        metadata = { name = "n" }, spec = { podSelector = {} } })
      assert.are.equal(1, n.metadata.generation)
      n.spec.podSelector = { matchLabels = { app = "a" } }
      local _, n2 = call(s, "PUT", NPS .. "/n", n)
      assert.are.equal(2, n2.metadata.generation)
      -- a ConfigMap has no generation, as on a cluster (the API server keeps
      -- none for it), and a change of its data gives it none
      local _, m = call(s, "POST", CMS, cm("m"))
      m.data.a = "2"
      local _, m2 = call(s, "PUT", CMS .. "/m", m)
      assert.is_nil(m2.metadata.generation)
    end)

    it("changes nothing for an update that changes nothing: same resourceVersion, no watch event", function()
      local s = new()
      local _, a = call(s, "POST", CMS, cm("a"))
      local w = s:watch(CMS .. "?watch=true&resourceVersion=" .. a.metadata.resourceVersion)
      local got = consume(w)
      local code, b = call(s, "PUT", CMS .. "/a", a)
      assert.are.same({ 200, a.metadata.resourceVersion }, { code, b.metadata.resourceVersion })
      code, b = call(s, "PATCH", CMS .. "/a", { data = { a = "1" } }, "application/merge-patch+json")
      assert.are.same({ 200, a.metadata.resourceVersion }, { code, b.metadata.resourceVersion })
      assert.are.same({}, got())
      w:close()
      assert.are.same({ "END" }, types(got()))
    end)

    it("keeps uid, creationTimestamp and deletionTimestamp as the API server does; a new uid is Invalid", function()
      local s = new()
      local _, a = call(s, "POST", CMS, cm("a"))
      local b = json.decode(json.encode(a))
      b.metadata.uid, b.metadata.creationTimestamp, b.metadata.generation = nil, "2001-01-01T00:00:00Z", 99
      b.data.a = "2"
      local _, c = call(s, "PUT", CMS .. "/a", b)
      assert.are.same({ a.metadata.uid, STAMP }, { c.metadata.uid, c.metadata.creationTimestamp })
      assert.is_nil(c.metadata.generation) -- the one it had: none (a ConfigMap's), never 99
      c.metadata.uid = "00000000-0000-4000-8000-000000000000"
      local code, st = call(s, "PUT", CMS .. "/a", c)
      assert.are.same({ 422, 'ConfigMap "a" is invalid: metadata.uid: Invalid value: "00000000-0000-4000-8000-000000000000": '
        .. "field is immutable" }, { code, st.message })
      c.metadata.uid = nil
      c.metadata.deletionTimestamp = STAMP
      code = call(s, "PUT", CMS .. "/a", c)
      assert.are.equal(422, code)
      c.metadata.deletionTimestamp = nil
      c.metadata.labels = { ok = "not ok!" }
      code, st = call(s, "PUT", CMS .. "/a", c)
      assert.are.same({ 422, "metadata.labels" }, { code, st.details.causes[1].field })
    end)
  end)

  describe("patch", function()
    it("merges an application/merge-patch+json (null deletes, maps merge, lists are replaced)", function()
      local s = new()
      call(s, "POST", CMS, cm("a", { data = { a = "1", b = "2" }, binaryData = json.null }))
      local code, b = call(s, "PATCH", CMS .. "/a", '{"data":{"a":null,"c":"3"},"metadata":{"labels":{"x":"y"},'
        .. '"finalizers":["f"]}}', "application/merge-patch+json")
      assert.are.equal(200, code)
      assert.are.same({ b = "2", c = "3" }, b.data)
      assert.are.same({ "f" }, b.metadata.finalizers)
      code, b = call(s, "PATCH", CMS .. "/a", '{"metadata":{"finalizers":["g"]}}', "application/merge-patch+json")
      assert.are.same({ 200, { "g" } }, { code, b.metadata.finalizers })
      code, b = call(s, "PATCH", CMS .. "/a", "{oops", "application/merge-patch+json")
      assert.are.same({ 400, "invalid JSON patch" }, { code, b.message })
      code, b = call(s, "PATCH", CMS .. "/missing", "{}", "application/merge-patch+json")
      assert.are.same({ 404, 'configmaps "missing" not found' }, { code, b.message })
      code, b = call(s, "PATCH", CMS .. "/a", "{}", "text/plain")
      assert.are.same({ 415, "UnsupportedMediaType" }, { code, b.reason })
    end)

    it("applies an application/json-patch+json (add, remove, replace, move, copy, test); a failed test is 422", function()
      local s = new()
      call(s, "POST", CMS, cm("a", { data = { a = "1", b = "2" } }))
      call(s, "PATCH", CMS .. "/a", '{"metadata":{"finalizers":["x","z"]}}', "application/merge-patch+json")
      local ops = {
        { op = "test", path = "/data/a", value = "1" },
        { op = "add", path = "/metadata/finalizers/1", value = "y" },
        { op = "add", path = "/metadata/finalizers/-", value = "end" },
        { op = "remove", path = "/data/b" },
        { op = "replace", path = "/data/a", value = "one" },
        { op = "copy", from = "/data/a", path = "/data/c" },
        { op = "move", from = "/data/c", path = "/data/d~1e" },
      }
      local code, b = call(s, "PATCH", CMS .. "/a", ops, "application/json-patch+json")
      assert.are.equal(200, code)
      assert.are.same({ a = "one", ["d/e"] = "one" }, b.data)
      assert.are.same({ "x", "y", "z", "end" }, b.metadata.finalizers)
      local st
      code, st = call(s, "PATCH", CMS .. "/a", { { op = "test", path = "/data/a", value = "1" } }, "application/json-patch+json")
      assert.are.same({ 422, "Invalid", "the server rejected our request due to an error in our request",
        "testing value /data/a failed: test failed" }, { code, st.reason, st.message, st.details.causes[1].message })
      code, st = call(s, "PATCH", CMS .. "/a", { { op = "remove", path = "/spec/nope" } }, "application/json-patch+json")
      assert.are.same({ 422, "Invalid" }, { code, st.reason })
      code, st = call(s, "PATCH", CMS .. "/a", { { op = "replace", path = "/metadata/name", value = "b" } },
        "application/json-patch+json")
      assert.are.same({ 400, "the name of the object (b) does not match the name on the URL (a)" }, { code, st.message })
      local _, now = call(s, "GET", CMS .. "/a")
      assert.are.same(b, now)
    end)

    it("merges a strategic merge patch by the lists' merge keys for built-in kinds, and answers 415 for custom resources", function()
      local s = new()
      s:seed { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "d", finalizers = { "a" } },
        spec = { template = { spec = { containers = {
          { name = "app", image = "app:1", env = { { name = "A", value = "1" } } },
          { name = "side", image = "side:1" } } } } } }
      local path = "/apis/apps/v1/namespaces/default/deployments/d"
      local code, d = call(s, "PATCH", path, { metadata = { finalizers = { "b" } }, spec = { template = { spec = {
        containers = { { name = "app", image = "app:2", env = { { name = "B", value = "2" } } },
                       { name = "side", ["$patch"] = "delete" } } } } } }, "application/strategic-merge-patch+json")
      assert.are.equal(200, code)
      local c = d.spec.template.spec.containers
      assert.are.equal(1, #c)
      assert.are.same({ "app:2", "A", "B" }, { c[1].image, c[1].env[1].name, c[1].env[2].name })
      assert.are.same({ "a", "b" }, d.metadata.finalizers)
      assert.are.equal(2, d.metadata.generation)
      code, d = call(s, "PATCH", path, { metadata = { ["$deleteFromPrimitiveList/finalizers"] = { "a" } } },
        "application/strategic-merge-patch+json")
      assert.are.same({ 200, { "b" } }, { code, d.metadata.finalizers })

      call(s, "POST", ATS, at("x"))
      local st
      code, st = call(s, "PATCH", ATS .. "/x", { spec = { command = "x" } }, "application/strategic-merge-patch+json")
      assert.are.same({ 415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media "
        .. "types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml" },
        { code, st.reason, st.message })
    end)

    it("applies (server-side apply, approximated): creates when missing, then merges the applied fields; needs a fieldManager", function()
      local s = new()
      local obj = at("x", { status = { phase = "X" } })
      local code, st = call(s, "PATCH", ATS .. "/x", obj, "application/apply-patch+yaml")
      assert.are.same({ 422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required '
        .. "for apply patch" }, { code, st.reason, st.message })
      local a
      code, a = call(s, "PATCH", ATS .. "/x?fieldManager=luaop&force=true", obj, "application/apply-patch+yaml")
      assert.are.same({ 201, "echo hi" }, { code, a.spec.command })
      assert.is_nil(a.status)
      code, a = call(s, "PATCH", ATS .. "/x?fieldManager=luaop", { apiVersion = obj.apiVersion, kind = "At",
        metadata = { name = "x", labels = { k = "v" } }, spec = { command = "echo 2" } }, "application/apply-patch+yaml")
      assert.are.same({ 200, "echo 2", "2027-01-15T09:00:00Z", "v", 2 },
        { code, a.spec.command, a.spec.schedule, a.metadata.labels.k, a.metadata.generation })
      code, a = call(s, "PATCH", ATS .. "/x/status?fieldManager=luaop", { apiVersion = obj.apiVersion, kind = "At",
        metadata = { name = "x" }, status = { phase = "DONE" }, spec = { command = "not through status" } },
        "application/apply-patch+yaml")
      assert.are.same({ 200, "DONE", "echo 2" }, { code, a.status.phase, a.spec.command })
      code = call(s, "PATCH", ATS .. "/x?fieldManager=luaop", { spec = {} }, "application/apply-patch+yaml")
      assert.are.equal(400, code) -- no apiVersion and kind
    end)

    it("checks a resourceVersion the patch carries, and changes only status through /status", function()
      local s = new()
      local _, a = call(s, "POST", ATS, at("x"))
      local code, st = call(s, "PATCH", ATS .. "/x", { metadata = { resourceVersion = "1" }, spec = { command = "y" } },
        "application/merge-patch+json")
      assert.are.same({ 409, "Conflict" }, { code, st.reason })
      local b
      code, b = call(s, "PATCH", ATS .. "/x", { metadata = { resourceVersion = a.metadata.resourceVersion },
        spec = { command = "y" }, status = { phase = "ignored" } }, "application/merge-patch+json")
      assert.are.same({ 200, "y" }, { code, b.spec.command })
      assert.is_nil(b.status)
      code, b = call(s, "PATCH", ATS .. "/x/status", { status = { phase = "RUNNING" }, spec = { command = "z" } },
        "application/merge-patch+json")
      assert.are.same({ 200, "RUNNING", "y" }, { code, b.status.phase, b.spec.command })
      code = call(s, "PATCH", CMS .. "/x/status", {}, "application/merge-patch+json")
      assert.are.equal(404, code) -- no /status for ConfigMaps
    end)
  end)

  describe("delete", function()
    it("deletes at once (DELETED with a new resourceVersion), checking preconditions as rest.BeforeDelete words them", function()
      local s = new()
      local _, a = call(s, "POST", CMS, cm("a"))
      local w = s:watch(CMS .. "?watch=true&resourceVersion=" .. a.metadata.resourceVersion)
      local got = consume(w)
      local code, st = call(s, "DELETE", CMS .. "/a", { apiVersion = "v1", kind = "DeleteOptions",
        preconditions = { uid = "other" } })
      assert.are.same({ 409, "Conflict", 'Operation cannot be fulfilled on ConfigMap "a": the UID in the precondition (other) '
        .. "does not match the UID in record (" .. a.metadata.uid .. "). The object might have been deleted and then "
        .. "recreated" }, { code, st.reason, st.message })
      code, st = call(s, "DELETE", CMS .. "/a", { preconditions = { resourceVersion = "1" } })
      assert.are.same({ 409, 'Operation cannot be fulfilled on ConfigMap "a": the ResourceVersion in the precondition (1) '
        .. "does not match the ResourceVersion in record (" .. a.metadata.resourceVersion .. "). The object might have "
        .. "been modified" }, { code, st.message })
      local gone
      code, gone = call(s, "DELETE", CMS .. "/a", { preconditions = { uid = a.metadata.uid,
        resourceVersion = a.metadata.resourceVersion } })
      assert.are.same({ 200, "Status", "Success", { name = "a", kind = "configmaps", uid = a.metadata.uid } },
        { code, gone.kind, gone.status, gone.details })
      assert.are.equal(404, (call(s, "GET", CMS .. "/a")))
      local ev = got()[1]
      assert.are.same({ "DELETED", "a", tostring(tonumber(a.metadata.resourceVersion) + 1) }, { ev.type, ev.name, ev.rv })
      assert.are.equal(404, (call(s, "DELETE", CMS .. "/a")))
      local pod = s:seed { apiVersion = "v1", kind = "Pod", metadata = { name = "p" } }
      code, gone = call(s, "DELETE", "/api/v1/namespaces/default/pods/p")
      assert.are.same({ 200, "Pod", pod.metadata.resourceVersion }, { code, gone.kind, gone.metadata.resourceVersion })
      code, st = call(s, "DELETE", CMS .. "/a", { propagationPolicy = "Sometimes" })
      assert.are.same({ 422, 'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sometimes": '
        .. 'supported values: "Foreground", "Background", "Orphan"' }, { code, st.message })
      w:close()
    end)

    it("keeps an object with finalizers (deletionTimestamp, MODIFIED) until an update removes the last one (DELETED)", function()
      local s = new()
      local _, a = call(s, "POST", ATS, at("x", { metadata = { name = "x", finalizers = { "f/one", "f/two" } } }))
      local got = consume(s:watch(ATS .. "?watch=true&resourceVersion=" .. a.metadata.resourceVersion))
      local code, d = call(s, "DELETE", ATS .. "/x")
      assert.are.same({ 200, STAMP, 0, 2 }, { code, d.metadata.deletionTimestamp, d.metadata.deletionGracePeriodSeconds,
        d.metadata.generation })
      local again
      code, again = call(s, "DELETE", ATS .. "/x") -- again: nothing changes
      assert.are.same({ 200, d.metadata.resourceVersion }, { code, again.metadata.resourceVersion })
      local st
      code, st = call(s, "PATCH", ATS .. "/x", { metadata = { finalizers = { "f/one", "f/two", "f/three" } } },
        "application/merge-patch+json")
      assert.are.same({ 422, 'At.cnat.programming-kubernetes.info "x" is invalid: metadata.finalizers: Forbidden: no new '
        .. 'finalizers can be added if the object is being deleted, found new finalizers []string{"f/three"}' },
        { code, st.message })
      call(s, "PATCH", ATS .. "/x", { metadata = { finalizers = { "f/two" } } }, "application/merge-patch+json")
      local _, cur = call(s, "GET", ATS .. "/x")
      cur.metadata.finalizers = nil
      code = call(s, "PUT", ATS .. "/x", cur)
      assert.are.equal(200, code)
      assert.are.equal(404, (call(s, "GET", ATS .. "/x")))
      assert.are.same({ "MODIFIED x", "MODIFIED x", "DELETED x" }, types(got()))
    end)

    local function owned(s, name, owner, extra)
      local obj = cm(name)
      obj.metadata.ownerReferences = { { apiVersion = owner.apiVersion or "v1", kind = owner.kind or "ConfigMap",
        name = owner.metadata.name, uid = owner.metadata.uid, controller = true, blockOwnerDeletion = true } }
      for k, v in pairs(extra or {}) do obj.metadata[k] = v end
      local _, o = call(s, "POST", CMS, obj)
      return o
    end

    local function left(s)
      local out = {}
      for _, o in ipairs(s:objects("ConfigMap", "default")) do
        out[#out + 1] = o.metadata.name .. (o.metadata.deletionTimestamp and "*" or "")
      end
      return table.concat(out, " ")
    end

    it("collects dependents in the background, recursively, each with its finalizers; one with another owner loses "
      .. "only the reference", function()
      local s = new()
      local _, root = call(s, "POST", CMS, cm("root"))
      local _, other = call(s, "POST", CMS, cm("other"))
      local child = owned(s, "child", root)
      owned(s, "grandchild", child)
      owned(s, "held", root, { finalizers = { "keep" } })
      local shared = owned(s, "shared", root)
      shared.metadata.ownerReferences[2] = { apiVersion = "v1", kind = "ConfigMap", name = "other",
        uid = other.metadata.uid }
      call(s, "PUT", CMS .. "/shared", shared)
      call(s, "DELETE", CMS .. "/root")
      assert.are.equal("held* other shared", left(s))
      local _, sh = call(s, "GET", CMS .. "/shared")
      assert.are.same({ "other" }, { sh.metadata.ownerReferences[1].name, sh.metadata.ownerReferences[2] })
    end)

    it("orphans dependents with propagationPolicy Orphan (their ownerReferences go)", function()
      local s = new()
      local _, root = call(s, "POST", CMS, cm("root"))
      owned(s, "child", root)
      local code, d = call(s, "DELETE", CMS .. "/root", { propagationPolicy = "Orphan" })
      assert.are.same({ 200, { "orphan" } }, { code, d.metadata.finalizers }) -- as answered, before the collector
      assert.are.equal("child", left(s))
      local _, child = call(s, "GET", CMS .. "/child")
      assert.is_nil(child.metadata.ownerReferences)
    end)

    it("deletes in the foreground: the owner stays (foregroundDeletion) until its blocking dependents are gone", function()
      local s = new()
      local _, root = call(s, "POST", CMS, cm("root"))
      owned(s, "child", root)
      owned(s, "held", root, { finalizers = { "keep" } })
      local code, d = call(s, "DELETE", CMS .. "/root", { propagationPolicy = "Foreground" })
      assert.are.same({ 200, { "foregroundDeletion" } }, { code, d.metadata.finalizers })
      assert.are.equal("held* root*", left(s))
      call(s, "PATCH", CMS .. "/held", { metadata = { finalizers = json.null } }, "application/merge-patch+json")
      assert.are.equal("", left(s))
    end)

    it("deletes a collection by selector, and deletes nothing on a dry run", function()
      local s = new()
      for _, n in ipairs { "a", "b", "c" } do
        call(s, "POST", CMS, cm(n, { metadata = { name = n, labels = { drop = n == "c" and "no" or "yes" } } }))
      end
      local code, st = call(s, "DELETE", CMS .. "/a?dryRun=All")
      assert.are.same({ 200, "Success" }, { code, st.status })
      assert.are.equal("a b c", left(s))
      local list
      code, list = call(s, "DELETE", CMS .. "?labelSelector=drop%3Dyes")
      assert.are.same({ 200, "ConfigMapList", 2 }, { code, list.kind, #list.items })
      assert.are.equal("c", left(s))
      assert.are.equal("deletecollection", s:last_action().verb)
    end)

    it("terminates a namespace: its objects go, then it does; the first namespaces may not be deleted", function()
      local s = new()
      call(s, "POST", "/api/v1/namespaces", { apiVersion = "v1", kind = "Namespace", metadata = { name = "work" } })
      local path = "/api/v1/namespaces/work/configmaps"
      call(s, "POST", path, cm("a"))
      call(s, "POST", path, cm("b", { metadata = { name = "b", finalizers = { "keep" } } }))
      call(s, "POST", "/api/v1/namespaces/work/secrets", { apiVersion = "v1", kind = "Secret", metadata = { name = "s" } })
      local code, ns = call(s, "DELETE", "/api/v1/namespaces/work")
      assert.are.same({ 200, "Terminating" }, { code, ns.status.phase })
      assert.are.same({ "b" }, { s:objects("configmaps", "work")[1].metadata.name, s:objects("secrets", "work")[1] })
      local st
      code, st = call(s, "POST", path, cm("c"))
      assert.are.same({ 403, "Forbidden", 'configmaps "c" is forbidden: unable to create new content in namespace work '
        .. "because it is being terminated" }, { code, st.reason, st.message })
      call(s, "PATCH", path .. "/b", { metadata = { finalizers = json.null } }, "application/merge-patch+json")
      assert.is_nil(s:get("Namespace", "work"))
      code, st = call(s, "DELETE", "/api/v1/namespaces/default")
      assert.are.same({ 403, 'namespaces "default" is forbidden: this namespace may not be deleted' }, { code, st.message })
      assert.are.equal(4, #s:objects("Namespace"))
    end)
  end)

  describe("watch", function()
    it("from no resourceVersion sends every current object as ADDED, then changes as they come; next() waits for them", function()
      local s = new()
      call(s, "POST", CMS, cm("a"))
      call(s, "POST", "/api/v1/namespaces/kube-system/configmaps", cm("k"))
      local w = s:watch(CMS .. "?watch=true&allowWatchBookmarks=true&timeoutSeconds=300")
      local got = consume(w)
      assert.are.same({ "ADDED a" }, types(got()))
      call(s, "POST", CMS, cm("b"))
      call(s, "POST", "/api/v1/namespaces/kube-system/configmaps", cm("other"))
      call(s, "PATCH", CMS .. "/a", { data = { a = "2" } }, "application/merge-patch+json")
      call(s, "DELETE", CMS .. "/b")
      assert.are.same({ "ADDED a", "ADDED b", "MODIFIED a", "DELETED b" }, types(got()))
      assert.are.equal("v1", got()[3].object.apiVersion)
      assert.are.equal("ConfigMap", got()[3].object.kind)
      w:close()
      assert.are.same("END", types(got())[5])
      assert.is_true(got()[5].ended)
    end)

    it("resumes exactly after any resourceVersion it handed out", function()
      local s = new()
      local rvs = {}
      local function note(_, obj) rvs[#rvs + 1] = obj.metadata.resourceVersion end
      note(call(s, "POST", CMS, cm("a")))
      note(call(s, "POST", CMS, cm("b")))
      note(call(s, "PATCH", CMS .. "/a", { data = { a = "2" } }, "application/merge-patch+json"))
      note(call(s, "POST", "/api/v1/namespaces/kube-system/configmaps", cm("c")))
      note(call(s, "DELETE", CMS .. "/b"))
      local _, list = call(s, "GET", "/api/v1/configmaps")
      local all = consume(s:watch("/api/v1/configmaps?watch=true&resourceVersion=" .. rvs[1]))
      local want = { "ADDED b", "MODIFIED a", "ADDED c", "DELETED b" }
      assert.are.same(want, types(all()))
      for i = 2, #rvs - 1 do
        local from = consume(s:watch("/api/v1/configmaps?watch=true&resourceVersion=" .. all()[i - 1].rv))
        assert.are.same(table.move(want, i, #want, 1, {}), types(from()), "from " .. all()[i - 1].rv)
      end
      local none = consume(s:watch("/api/v1/configmaps?watch=true&resourceVersion=" .. list.metadata.resourceVersion))
      assert.are.same({}, none())
    end)

    it("turns an object that stops matching its selectors into DELETED, and one that starts into ADDED", function()
      local s = new()
      local _, a = call(s, "POST", CMS, cm("a", { metadata = { name = "a", labels = { app = "web" } } }))
      local got = consume(s:watch(CMS .. "?watch=true&labelSelector=app%3Dweb&resourceVersion=" .. a.metadata.resourceVersion))
      call(s, "PATCH", CMS .. "/a", { metadata = { labels = { app = "db" } } }, "application/merge-patch+json")
      call(s, "PATCH", CMS .. "/a", { data = { a = "2" } }, "application/merge-patch+json")
      call(s, "PATCH", CMS .. "/a", { metadata = { labels = { app = "web" } } }, "application/merge-patch+json")
      call(s, "PATCH", CMS .. "/a", { data = { a = "3" } }, "application/merge-patch+json")
      assert.are.same({ "DELETED a", "ADDED a", "MODIFIED a" }, types(got()))
      assert.are.equal("db", got()[1].object.metadata.labels.app) -- the object as it is now
      local field = consume(s:watch("/api/v1/configmaps?watch=true&fieldSelector=metadata.name%3Da"))
      call(s, "POST", CMS, cm("b"))
      call(s, "DELETE", CMS .. "/a")
      assert.are.same({ "ADDED a", "DELETED a" }, types(field()))
    end)

    it("ends every open watch with 410 Expired on expire_watches, and answers a watch from an older resourceVersion "
      .. "with 410 at once", function()
      local s = new()
      local _, a = call(s, "POST", CMS, cm("a"))
      local got = consume(s:watch(CMS .. "?watch=true&resourceVersion=" .. a.metadata.resourceVersion))
      s:expire_watches()
      local last = got()[1]
      assert.are.equal(410, last.ended)
      assert.are.same({ "Status", "Expired", 410 }, { last.body.kind, last.body.reason, last.body.code })
      assert.matches("^too old resource version: %d+ %(%d+%)$", last.body.message)
      local old = consume(s:watch(CMS .. "?watch=true&resourceVersion=" .. (tonumber(a.metadata.resourceVersion) - 1)))
      assert.are.equal(410, old()[1].ended)
      local current = consume(s:watch(CMS .. "?watch=true&resourceVersion=" .. s:resource_version()))
      call(s, "POST", CMS, cm("b"))
      assert.are.same({ "ADDED b" }, types(current()))
      s:end_watches()
      assert.are.same({ "ADDED b", "END" }, types(current()))
      assert.is_true(current()[2].ended)
      local bad = consume(s:watch(CMS .. "?watch=true&labelSelector=%3D%3D"))
      assert.are.equal(400, bad()[1].ended)
      local unknown = consume(s:watch("/api/v1/namespaces/default/widgets?watch=true"))
      assert.are.equal(404, unknown()[1].ended)
    end)

    it("watches one object by its path", function()
      local s = new()
      call(s, "POST", CMS, cm("a"))
      call(s, "POST", CMS, cm("b"))
      local got = consume(s:watch(CMS .. "/a?watch=true"))
      call(s, "PATCH", CMS .. "/b", { data = { a = "2" } }, "application/merge-patch+json")
      call(s, "PATCH", CMS .. "/a", { data = { a = "2" } }, "application/merge-patch+json")
      assert.are.same({ "ADDED a", "MODIFIED a" }, types(got()))
    end)

    it("refuses a second task waiting on the same watch", function()
      local s = new()
      local w = s:watch(CMS .. "?watch=true")
      consume(w)
      local ok, err = in_task(function() return pcall(w.next, w) end)
      assert.is_false(ok)
      assert.matches("another task is already waiting on this watch", err)
      w:close()
    end)
  end)

  describe("for tests", function()
    it("logs every request as client-go's fake Actions(), reads included, with copies", function()
      local s = new()
      call(s, "POST", CMS .. "?fieldManager=me", cm("a"))
      call(s, "GET", CMS .. "/a")
      call(s, "GET", CMS .. "?labelSelector=x")
      call(s, "PUT", ATS .. "/nope/status", at("nope"))
      call(s, "PATCH", CMS .. "/a", { data = { b = "2" } }, "application/merge-patch+json; charset=utf-8")
      call(s, "DELETE", CMS .. "/a", { propagationPolicy = "Background" })
      s:watch(CMS .. "?watch=true&resourceVersion=5")
      call(s, "GET", "/api/v1") -- discovery is not an action
      local log = s:actions()
      local verbs = {}
      for i, e in ipairs(log) do verbs[i] = e.verb end
      assert.are.same({ "create", "get", "list", "update", "patch", "delete", "watch" }, verbs)
      assert.are.same({ "configmaps", "", "v1", "ConfigMap", "default", "a", "me", 201 },
        { log[1].resource, log[1].group, log[1].version, log[1].kind, log[1].namespace, log[1].name,
          log[1].field_manager, log[1].code })
      assert.are.same({ "1" }, { log[1].object.data.a })
      -- a create logs what was sent, and beside it what came back
      assert.is_nil(log[1].object.metadata.uid)
      assert.are.same({ "a", "string" }, { log[1].result.metadata.name, type(log[1].result.metadata.uid) })
      assert.are.same({ "a", 200 }, { log[2].object.metadata.name, log[2].code })
      assert.are.same({ "x", "ConfigMapList" }, { log[3].label_selector, log[3].object.kind })
      assert.are.same({ "status", "ats", "cnat.programming-kubernetes.info", 404, "NotFound" },
        { log[4].subresource, log[4].resource, log[4].group, log[4].code, log[4].reason })
      assert.are.same({ "application/merge-patch+json", "2", "2" },
        { log[5].patch_type, log[5].patch.data.b, log[5].object.data.b })
      assert.are.same({ "Background" }, { log[6].options.propagationPolicy })
      assert.are.same({ "5" }, { log[7].resource_version })
      log[1].object.data.a = "changed"
      assert.are.equal("1", s:actions()[1].object.data.a)
      assert.are.equal(5, #s:actions(3))
      assert.are.equal("watch", s:last_action().verb)
      assert.are.same(s:actions(1, function(i) return i == 5 end), s:actions(1, function(i) return i == 5 end))
      s:clear_actions()
      assert.are.same({}, s:actions())
    end)

    it("fails the next matching requests as asked (times, any or one subresource, name), logged as injected", function()
      local s = new()
      call(s, "POST", ATS, at("x"))
      local rule = s:fail { verb = "update", resource = "ats", subresource = "status", reason = "Conflict", times = 2 }
      local _, a = call(s, "GET", ATS .. "/x")
      a.status = { phase = "RUNNING" }
      local code, st = call(s, "PUT", ATS .. "/x/status", a)
      assert.are.same({ 409, "Conflict", 'Operation cannot be fulfilled on ats.cnat.programming-kubernetes.info "x": the '
        .. "object has been modified; please apply your changes to the latest version and try again" },
        { code, st.reason, st.message })
      assert.are.equal(1, rule.times)
      a.spec.command = "echo 2"
      assert.are.equal(200, (call(s, "PUT", ATS .. "/x", a))) -- the object itself: not matched
      _, a = call(s, "GET", ATS .. "/x")
      a.status = { phase = "RUNNING" }
      assert.are.equal(409, (call(s, "PUT", ATS .. "/x/status", a))) -- the second injected
      assert.are.same({}, s.rules)
      assert.are.equal(200, (call(s, "PUT", ATS .. "/x/status", a)))
      local injected = 0
      for _, e in ipairs(s:actions()) do if e.injected then injected = injected + 1 end end
      assert.are.equal(2, injected)

      s:fail { verb = "create", kind = "ConfigMap", name = "b", reason = "Forbidden", times = math.huge }
      assert.are.equal(201, (call(s, "POST", CMS, cm("a"))))
      for _ = 1, 3 do
        code, st = call(s, "POST", CMS, cm("b"))
        assert.are.same({ 403, 'configmaps "b" is forbidden: User "system:serviceaccount:default:luaop" cannot create '
          .. 'resource "configmaps" in API group "" in the namespace "default"' }, { code, st.message })
      end
      assert.is_nil(s:get("ConfigMap", "default", "b"))
      s:clear_failures()
      s:fail { code = 503, message = "etcd is down" }
      code, st = call(s, "GET", CMS)
      assert.are.same({ 503, "ServiceUnavailable", "etcd is down" }, { code, st.reason, st.message })
      s:fail { verb = "watch", reason = "Expired" }
      local w = consume(s:watch(CMS .. "?watch=true"))
      assert.are.equal(410, w()[1].ended)
    end)

    it("seeds objects (their namespace too, status kept) and reads them back as copies", function()
      local s = new()
      local pod = s:seed { apiVersion = "v1", kind = "Pod", metadata = { name = "p", namespace = "new-ns",
        uid = "11111111-1111-4111-8111-111111111111" }, status = { phase = "Running" } }
      assert.are.same({ "Running", "11111111-1111-4111-8111-111111111111", STAMP },
        { pod.status.phase, pod.metadata.uid, pod.metadata.creationTimestamp })
      assert.is_not_nil(s:get("Namespace", "new-ns"))
      assert.are.same({}, s:actions())
      local got = s:get("v1/Pod", "new-ns", "p")
      got.status.phase = "changed"
      assert.are.equal("Running", s:get("pods", "new-ns", "p").status.phase)
      local gen = s:seed { apiVersion = "v1", kind = "ConfigMap", metadata = { generateName = "g-" } }
      assert.matches("^g%-", gen.metadata.name)
      assert.are.equal(1, #s:objects("configmaps"))
      assert.are.equal(1, #s:objects("ConfigMap", "default"))
      assert.are.equal(0, #s:objects("ConfigMap", "kube-system"))
      assert.has_error(function() s:seed { apiVersion = "v1", kind = "Widget", metadata = { name = "w" } } end)
      assert.has_error(function() s:objects("widgets") end)
      assert.are.equal("ats.cnat.programming-kubernetes.info", s:get("CustomResourceDefinition",
        "ats.cnat.programming-kubernetes.info").metadata.name)
      assert.are.equal("True", s:get("crd", "ats.cnat.programming-kubernetes.info").status.conditions[2].status)
      s:add_crd(AT_CRD) -- again: still served, still one
      assert.are.equal(1, #s:objects("customresourcedefinitions"))
      -- seeding again replaces (uid and status stay unless given)
      local again = s:seed { apiVersion = "v1", kind = "Pod", metadata = { name = "p", namespace = "new-ns",
        labels = { v = "2" } } }
      assert.are.same({ pod.metadata.uid, "Running", "2" }, { again.metadata.uid, again.status.phase,
        again.metadata.labels.v })
      assert.are.equal(s:resource_version(), again.metadata.resourceVersion)
    end)

    it("takes the repository's manifests as they are: CRDs served, every other object seeded", function()
      local s = new { crd = false }
      local files = {}
      local ls = assert(io.popen("ls manifests/crds/*.yaml manifests/rbac/*.yaml manifests/deploy/*.yaml "
        .. "manifests/samples/*.yaml"))
      for f in ls:lines() do files[#files + 1] = f end
      ls:close()
      local seeded = 0
      for _, f in ipairs(files) do
        local fh = assert(io.open(f))
        local docs = assert(core.yaml.decode(fh:read("a")))
        fh:close()
        for _, d in ipairs(docs) do
          if d.kind == "CustomResourceDefinition" then
            s:add_crd(d)
          elseif next(d) and d.kind ~= "Kustomization" then
            s:seed(d)
            seeded = seeded + 1
          end
        end
      end
      assert.is_true(seeded >= 10, seeded)
      assert.are.equal(3, #s:objects("crd"))
      for _, kind in ipairs { "RoleBinding", "Deployment", "Service", "At", "Machine", "Switch" } do
        assert.are.equal(1, #s:objects(kind), kind)
      end
      assert.are.equal(3, #s:objects("ClusterRole")) -- luaop's, and --metrics-secure's two
      assert.are.equal("Active", s:get("Namespace", "luaop-system").status.phase)
    end)

    it("serves a CRD created through the API, and stops serving it (and its objects) when it is deleted", function()
      local s = new { crd = false }
      local crd = json.decode(json.encode(AT_CRD))
      local code = call(s, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
      assert.are.equal(201, code)
      assert.are.equal(201, (call(s, "POST", ATS, at("x"))))
      local got = consume(s:watch(ATS .. "?watch=true"))
      code = call(s, "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" .. crd.metadata.name)
      assert.are.equal(200, code)
      assert.are.same({ "ADDED x", "DELETED x", "END" }, types(got()))
      assert.are.equal(404, (call(s, "GET", ATS)))
      assert.are.equal(404, (call(s, "GET", "/apis/cnat.programming-kubernetes.info/v1alpha1")))
      crd.metadata.name = "wrong"
      local st
      code, st = call(s, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
      assert.are.same({ 422, "Invalid" }, { code, st.reason })
    end)

    it("stamps times from its clock", function()
      local now = T
      local s = new { now = function() return now end }
      now = T + 3661.9
      local _, a = call(s, "POST", CMS, cm("a", { metadata = { name = "a", finalizers = { "f" } } }))
      assert.are.equal("2027-01-15T09:01:01Z", a.metadata.creationTimestamp)
      now = T + 7200
      local _, d = call(s, "DELETE", CMS .. "/a")
      assert.are.equal("2027-01-15T10:00:00Z", d.metadata.deletionTimestamp)
    end)
  end)

  describe("behind luaop's client and informer", function()
    local client = require "luaop.client"
    local api = core.api

    -- core.api served by s for the length of a test, as the kit wires it.
    local function wire(s)
      local saved = { request = api.request, start = api.start, watch = api.watch, info = api.info }
      api.request = function(spec) return s:request(spec.method, spec.path, spec.body, spec.content_type) end
      api.start = function(spec)
        local status, text = s:request(spec.method, spec.path, spec.body, spec.content_type)
        return { wait = function() return status, text end, cancel = function() end }
      end
      api.watch = function(spec) return s:watch(spec.path) end
      api.info = function() return { server = "https://apiserver.test", namespace = "default" } end
      client.forget_discovery()
      finally(function()
        for k, f in pairs(saved) do api[k] = f end
        client.forget_discovery()
      end)
      return client.new()
    end

    it("answers the client's calls, its errors as the client reports the API server's", function()
      local s = new()
      local c = wire(s)
      in_task(function()
        local obj = assert(c:create(at("x")))
        assert.are.equal("x", obj.metadata.name)
        local _, err = c:create(at("x"))
        assert.are.same({ 409, "AlreadyExists", 'ats.cnat.programming-kubernetes.info "x" already exists' },
          { err.code, err.reason, err.message })
        obj.status = { phase = "RUNNING" }
        local st = assert(c:update_status(obj))
        assert.are.equal("RUNNING", st.status.phase)
        _, err = c:update_status(obj)
        assert.are.equal("Conflict", err.reason)
        assert.are.equal("y", assert(c:patch("At", "x", { spec = { command = "y" } })).spec.command)
        assert.are.equal("z", assert(c:patch("At", "x", { { op = "replace", path = "/spec/command", value = "z" } },
          { type = "json" })).spec.command)
        local applied = assert(c:apply(at("x", { spec = { command = "applied" } })))
        assert.are.equal("applied", applied.spec.command)
        assert.are.equal(1, #assert(c:list("cnat.programming-kubernetes.info/v1alpha1/At")).items)
        local cms = assert(c:list("ConfigMap", { all_namespaces = true }))
        assert.are.equal(0, #cms.items)
        assert(c:create { apiVersion = "coordination.k8s.io/v1", kind = "Lease", metadata = { name = "l" }, spec = {} })
        assert(c:get("Lease", "l"))
        assert(c:delete("At", "x"))
        _, err = c:get("At", "x")
        assert.are.same({ 404, "NotFound" }, { err.code, err.reason })
        local events = assert(c:list("events.k8s.io/v1/Event"))
        assert.are.equal("EventList", events.kind)
      end)
      local verbs = {}
      for _, e in ipairs(s:actions()) do verbs[#verbs + 1] = e.verb end
      assert.are.equal("create create update update patch patch patch list list create get delete get list",
        table.concat(verbs, " "))
    end)

    it("takes luaop's Events: the first as a create, the repeat as a merge patch of its series", function()
      local s = new()
      wire(s)
      local events = require "luaop.events"
      local pod = s:seed { apiVersion = "v1", kind = "Pod", metadata = { name = "p" } }
      in_task(function()
        for _ = 1, 2 do
          assert(events.record { regarding = pod, type = "Warning", reason = "ApiserverSpec", note = "n",
            controller = "spec" })
        end
        events.flush(5)
      end)
      local stored = s:objects("events.k8s.io/v1/Event")
      assert.are.equal(1, #stored)
      assert.are.same({ "ApiserverSpec", 2, "p" }, { stored[1].reason, stored[1].series.count, stored[1].regarding.name })
      local verbs = {}
      for i, e in ipairs(s:actions()) do verbs[i] = e.verb .. " " .. e.resource .. " " .. tostring(e.code) end
      assert.are.same({ "create events 201", "patch events 200" }, verbs)
    end)

    -- an informer's cache over the kit's server: streamed (the default) or
    -- listed in pages; the requests it made, as "verb query" strings
    local function informer_cache(stream)
      local informer = require "luaop.informer"
      local saved = informer.STREAM
      informer.STREAM = stream
      -- (the informer's backoff before it lists again is on the kit's clock)
      core.kit.virtual_clock()
      finally(function() informer.STREAM = saved; core.kit.real_clock() end)
      local s = new()
      call(s, "POST", CMS, cm("a"))
      call(s, "POST", CMS, cm("b"))
      call(s, "POST", "/api/v1/namespaces/kube-system/configmaps", cm("k"))
      local c = wire(s)
      local inf = require("luaop.informer").new("ConfigMap", { namespace = "default", client = c })
      local seen = {}
      inf:on {
        add = function(o) seen[#seen + 1] = "add " .. o.metadata.name end,
        update = function(_, o) seen[#seen + 1] = "update " .. o.metadata.name end,
        delete = function(o) seen[#seen + 1] = "delete " .. o.metadata.name end,
      }
      inf:start()
      core.kit.run()
      assert.is_true(inf.synced)
      assert.are.same({ "add a", "add b" }, seen)
      call(s, "POST", CMS, cm("c"))
      call(s, "PATCH", CMS .. "/a", { data = { a = "2" } }, "application/merge-patch+json")
      call(s, "DELETE", CMS .. "/b")
      core.kit.run()
      assert.are.same({ "add a", "add b", "add c", "update a", "delete b" }, seen)
      assert.are.equal("2", inf:get("default", "a").data.a)
      assert.are.equal(1, inf.relists)
      -- the watch expires; meanwhile c goes and d comes: the relist tells both
      s:expire_watches()
      call(s, "DELETE", CMS .. "/c")
      call(s, "POST", CMS, cm("d"))
      core.kit.run()
      core.kit.advance(1.6) -- the backoff: 0.8 s, jittered up to twice
      core.kit.run()
      assert.are.equal(2, inf.relists)
      assert.are.equal(2, #inf:list())
      assert.is_not_nil(inf:get("default", "d"))
      assert.are.same({ "add d", "delete c" }, { seen[6], seen[7] }) -- (the informer's order: upserts, then the vanished)
      call(s, "POST", CMS, cm("e"))
      core.kit.run()
      assert.are.equal("add e", seen[8])
      local lists, watches = 0, 0
      for _, e in ipairs(s:actions()) do
        if e.verb == "list" then lists = lists + 1 end
        if e.verb == "watch" then watches = watches + 1 end
      end
      inf:stop()
      core.kit.run()
      return lists, watches
    end

    it("keeps an informer's cache: a streamed list (sendInitialEvents) that goes on as the watch of creates, "
      .. "updates and deletes; streamed again after expiry", function()
      assert.are.same({ 0, 2 }, { informer_cache(true) })
    end)

    it("keeps an informer's cache: a paged list, then a watch that follows creates, updates and deletes; a relist "
      .. "after expiry", function()
      assert.are.same({ 2, 2 }, { informer_cache(false) })
    end)

    it("refuses sendInitialEvents without resourceVersionMatch=NotOlderThan or allowWatchBookmarks=true, "
      .. "as kube-apiserver does", function()
      local s = new()
      for query, field in pairs {
        ["allowWatchBookmarks=true&sendInitialEvents=true"] = "resourceVersionMatch",
        ["resourceVersionMatch=NotOlderThan&sendInitialEvents=true"] = "allowWatchBookmarks",
      } do
        local w = s:watch(CMS .. "?watch=true&" .. query)
        local line, status, body = w:next()
        assert.is_nil(line)
        assert.are.equal(422, status)
        assert.matches(field, body)
      end
      -- with both: the state, then the bookmark marking its end
      call(s, "POST", CMS, cm("a"))
      local w = s:watch(CMS .. "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
      assert.matches('"type":"ADDED"', w:next())
      assert.matches('"k8s.io/initial%-events%-end":"true"', w:next())
    end)

    it("does the same through the shipped binary, with its event loop", function()
      local out = luaop.ok([[
        local core = require "luaop.core"
        local client = require "luaop.client"
        local s = require("luaop.testing.apiserver").new()
        local api = core.api
        api.request = function(spec) return s:request(spec.method, spec.path, spec.body, spec.content_type) end
        api.start = function(spec)
          local status, text = s:request(spec.method, spec.path, spec.body, spec.content_type)
          return { wait = function() return status, text end, cancel = function() end }
        end
        api.watch = function(spec) return s:watch(spec.path) end
        client.forget_discovery()
        local c = client.new { namespace = "default" }
        assert(c:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "a" } })
        local inf = require("luaop.informer").new("ConfigMap", { namespace = "default", client = c })
        inf:start()
        inf:wait_synced()
        local function wait_for(f)
          local deadline = core.task.now() + 10
          while not f() and core.task.now() < deadline do core.task.sleep(0.001) end
          return f()
        end
        assert(c:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "b" } })
        assert(wait_for(function() return inf:get("default", "b") end), "b never came")
        s:expire_watches()
        assert(c:delete("ConfigMap", "a"))
        assert(wait_for(function() return inf.relists == 2 and not inf:get("default", "a") end), "no relist")
        inf:stop()
        print("ok", #inf:list(), inf.relists)
      ]], { offline = true, flags = { "--qps", "0" } })
      assert.matches("ok\t1\t2", out)
    end)
  end)
end)

-- The defaults and canonical quantities of luaop.testing.apiserver.defaults,
-- .podspec and .quantity: each case below was read back from kube-apiserver
-- v1.34.4 (spec/e2e/parity_spec.lua compares the whole objects).
describe("luaop.apiserver's defaults", function()
  local quantity = require "luaop.testing.apiserver.quantity"
  local NS = "/api/v1/namespaces/default/"

  local function post(s, path, obj)
    local code, got = call(s, "POST", path, obj)
    assert(code == 201, ("%s answered %s: %s"):format(path, tostring(code), json.encode(got)))
    return got
  end

  it("writes a quantity as resource.Quantity does: canonical form, kept as given when already canonical", function()
    -- in a ResourceList (rounded up to the milli, as SetDefaults_ResourceList does)
    local cases = {
      ["0.5"] = "500m", ["1000m"] = "1", ["1.5Gi"] = "1536Mi", ["1e3"] = "1e3", ["+2"] = "+2", ["01"] = "01",
      ["2.0"] = "2", ["2048Mi"] = "2Gi", ["100Mi"] = "100Mi", ["16Mi"] = "16Mi", ["0.5Gi"] = "512Mi",
      ["0.1Ki"] = "102400m", ["0.1m"] = "1m", ["0.1n"] = "1m", ["1.50"] = "1500m", ["1e4"] = "10e3",
      ["1.5e3"] = "1500", ["1000E"] = "1", ["8Ei"] = "9223372036854775807", ["1Ki"] = "1Ki", ["1023"] = "1023",
      ["0.0000000001"] = "1m", ["123456789012345678901234"] = "123456789012345678901234", ["1."] = "1.",
      [".5"] = "500m", ["1024Ki"] = "1Mi", ["12e6"] = "12e6", ["1E"] = "1E", ["1E3"] = "1E3", ["1e-3"] = "1e-3",
      [" 3 "] = "3", ["1.5Ki"] = "1536", ["1Ei"] = "1Ei", ["0.001Ki"] = "1024m", ["1.0001Ki"] = "1024103m",
      ["1500u"] = "2m", ["1u"] = "1m", ["1e-4"] = "1e-3", ["0.0001Ki"] = "103m", ["1.5m"] = "2m",
      ["9999999999999999999"] = "9999999999999999999", ["10Ei"] = "9223372036854775807", ["0.5e1"] = "5",
    }
    local got, want = {}, {}
    for input, canonical in pairs(cases) do
      got[input], want[input] = quantity.canonical(input, true), canonical
    end
    assert.are.same(want, got)
    -- a JSON number reads as its text does
    assert.are.same({ "500m", "2" }, { quantity.canonical(0.5, true), quantity.canonical(2, true) })
    -- outside a ResourceList (emptyDir's sizeLimit) nothing rounds to the milli
    assert.are.same({ "100u", "1n", "512Mi" },
      { quantity.canonical("0.1m"), quantity.canonical("0.1n"), quantity.canonical("0.5Gi") })
    for _, bad in ipairs { "1x", "1.5.5", "1Qi", "", "abc" } do
      local q, err = quantity.canonical(bad, true)
      assert.is_nil(q, bad)
      assert.matches("quantities must match the regular expression", err, 1, true)
    end
  end)

  it("stores a ResourceQuota's \"0.5\" as \"500m\" on create and on update, so a check of what is current holds", function()
    local s = new { crd = false }
    local q = post(s, NS .. "resourcequotas", { apiVersion = "v1", kind = "ResourceQuota", metadata = { name = "q" },
      spec = { hard = { ["requests.cpu"] = "0.5", ["requests.memory"] = "1.5Gi", pods = "10" } } })
    assert.are.same({ ["requests.cpu"] = "500m", ["requests.memory"] = "1536Mi", pods = "10" }, q.spec.hard)
    assert.are.same({}, q.status)
    -- a PUT of the manifest as first written stores nothing new
    local again = { apiVersion = "v1", kind = "ResourceQuota", metadata = { name = "q" },
      spec = { hard = { ["requests.cpu"] = "0.5", ["requests.memory"] = "1.5Gi", pods = "10" } } }
    local code, same = call(s, "PUT", NS .. "resourcequotas/q", again)
    assert.are.same({ 200, q.metadata.resourceVersion }, { code, same.metadata.resourceVersion })
    again.spec.hard["limits.cpu"] = "1000m"
    local _, changed = call(s, "PUT", NS .. "resourcequotas/q", again)
    assert.are.same({ "1", "500m" }, { changed.spec.hard["limits.cpu"], changed.spec.hard["requests.cpu"] })
    -- and a merge patch
    local _, patched = call(s, "PATCH", NS .. "resourcequotas/q", { spec = { hard = { pods = "2.0" } } },
      "application/merge-patch+json")
    assert.are.equal("2", patched.spec.hard.pods)
    -- a quantity the API server cannot read is refused as it words it
    local bad_code, st = call(s, "POST", NS .. "resourcequotas", { apiVersion = "v1", kind = "ResourceQuota",
      metadata = { name = "bad" }, spec = { hard = { cpu = "1x" } } })
    assert.are.same({ 400, "BadRequest",
      "ResourceQuota in version \"v1\" cannot be handled as a ResourceQuota: quantities must match the regular "
        .. "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'" }, { bad_code, st.reason, st.message })
  end)

  it("defaults a LimitRange's Container item: default from max, defaultRequest from default then min", function()
    local s = new { crd = false }
    local lr = post(s, NS .. "limitranges", { apiVersion = "v1", kind = "LimitRange", metadata = { name = "l" },
      spec = { limits = { { type = "Container", max = { cpu = "+2", memory = "1Gi" }, default = { cpu = "0.5" },
        min = { memory = "0.5Gi" }, maxLimitRequestRatio = { cpu = "2.0" } } } } })
    assert.are.same({ type = "Container", max = { cpu = "+2", memory = "1Gi" }, default = { cpu = "500m", memory = "1Gi" },
      defaultRequest = { cpu = "500m", memory = "1Gi" }, min = { memory = "512Mi" }, maxLimitRequestRatio = { cpu = "2" } },
      lr.spec.limits[1])
  end)

  it("defaults a Pod and admits it as kube-apiserver's default plugins do: ServiceAccount token, tolerations, priority", function()
    local s = new { crd = false }
    local pod = post(s, NS .. "pods", { apiVersion = "v1", kind = "Pod", metadata = { name = "p" },
      spec = { containers = { { name = "c", image = "nginx", ports = { { containerPort = 80 } },
        resources = { requests = { cpu = "0.5", memory = "1.5Gi" }, limits = { cpu = "1000m", memory = "2048Mi" } } } } } })
    local spec, c = pod.spec, pod.spec.containers[1]
    local vol = spec.volumes[1].name
    assert.matches("^kube%-api%-access%-[bcdfghjklmnpqrstvwxz2456789]+$", vol)
    assert.are.same({ image = "nginx", imagePullPolicy = "Always", name = "c",
      ports = { { containerPort = 80, protocol = "TCP" } },
      resources = { limits = { cpu = "1", memory = "2Gi" }, requests = { cpu = "500m", memory = "1536Mi" } },
      terminationMessagePath = "/dev/termination-log", terminationMessagePolicy = "File",
      volumeMounts = { { mountPath = "/var/run/secrets/kubernetes.io/serviceaccount", name = vol, readOnly = true } } }, c)
    spec.containers, spec.volumes[1].name = nil, "V"
    assert.are.same({
      dnsPolicy = "ClusterFirst", enableServiceLinks = true, preemptionPolicy = "PreemptLowerPriority", priority = 0,
      restartPolicy = "Always", schedulerName = "default-scheduler", securityContext = {}, serviceAccount = "default",
      serviceAccountName = "default", terminationGracePeriodSeconds = 30,
      tolerations = {
        { effect = "NoExecute", key = "node.kubernetes.io/not-ready", operator = "Exists", tolerationSeconds = 300 },
        { effect = "NoExecute", key = "node.kubernetes.io/unreachable", operator = "Exists", tolerationSeconds = 300 } },
      volumes = { { name = "V", projected = { defaultMode = 420, sources = {
        { serviceAccountToken = { expirationSeconds = 3607, path = "token" } },
        { configMap = { items = { { key = "ca.crt", path = "ca.crt" } }, name = "kube-root-ca.crt" } },
        { downwardAPI = { items = { { fieldRef = { apiVersion = "v1", fieldPath = "metadata.namespace" },
          path = "namespace" } } } } } } } },
    }, spec)
    assert.are.same({ phase = "Pending", qosClass = "Burstable" }, pod.status)
  end)

  it("mounts no token when automount is off, takes requests from limits in a Pod (not in a template), Guaranteed", function()
    local s = new { crd = false }
    local pod = post(s, NS .. "pods", { apiVersion = "v1", kind = "Pod", metadata = { name = "p" },
      spec = { automountServiceAccountToken = false,
        initContainers = { { name = "i", image = "busybox@sha256:00", resources = { limits = { cpu = 1, memory = "1Gi" } } } },
        containers = { { name = "c", image = "reg:5000/app", resources = { limits = { cpu = "2", memory = "1Gi" } } } },
        volumes = { { name = "v", emptyDir = { sizeLimit = "0.5Gi" } } } } })
    assert.are.same({ { name = "v", emptyDir = { sizeLimit = "512Mi" } } }, pod.spec.volumes)
    assert.is_nil(pod.spec.containers[1].volumeMounts)
    assert.are.same({ "Always", "IfNotPresent" }, { pod.spec.containers[1].imagePullPolicy,
      pod.spec.initContainers[1].imagePullPolicy })
    assert.are.same({ cpu = "1", memory = "1Gi" }, pod.spec.initContainers[1].resources.requests)
    assert.are.equal("Guaranteed", pod.status.qosClass)
    -- qosClass stays through a status update that leaves it out, as on the real server
    pod.status = { phase = "Running" }
    local _, running = call(s, "PUT", NS .. "pods/p/status", pod)
    assert.are.same({ phase = "Running", qosClass = "Guaranteed" }, running.status)
    local d = post(s, "/apis/apps/v1/namespaces/default/deployments", { apiVersion = "apps/v1", kind = "Deployment",
      metadata = { name = "d" }, spec = { selector = { matchLabels = { app = "d" } }, template = {
        metadata = { labels = { app = "d" } },
        spec = { containers = { { name = "c", image = "nginx:1.27", resources = { limits = { cpu = "0.25" } } } } } } } })
    assert.are.same({ limits = { cpu = "250m" } }, d.spec.template.spec.containers[1].resources)
    assert.are.same({ 1, 10, 600, { type = "RollingUpdate", rollingUpdate = { maxSurge = "25%", maxUnavailable = "25%" } } },
      { d.spec.replicas, d.spec.revisionHistoryLimit, d.spec.progressDeadlineSeconds, d.spec.strategy })
    assert.are.same({}, d.status)
    -- a ServiceAccount named that does not exist is refused, as the admission plugin refuses it
    local code, st = call(s, "POST", NS .. "pods", { apiVersion = "v1", kind = "Pod", metadata = { name = "q" },
      spec = { serviceAccountName = "ghost", containers = { { name = "c", image = "i" } } } })
    assert.are.same({ 403, 'pods "q" is forbidden: error looking up service account default/ghost: serviceaccount "ghost" not found' },
      { code, st.message })
  end)

  it("keeps a Deployment current: its manifest PUT again, or patched with what it has, writes nothing", function()
    local s = new { crd = false }
    local manifest = { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "d" },
      spec = { selector = { matchLabels = { app = "d" } }, template = { metadata = { labels = { app = "d" } },
        spec = { containers = { { name = "c", image = "nginx", resources = { requests = { cpu = "0.5" } } } } } } } }
    local d = post(s, "/apis/apps/v1/namespaces/default/deployments", manifest)
    local code, again = call(s, "PUT", "/apis/apps/v1/namespaces/default/deployments/d", manifest)
    assert.are.same({ 200, d.metadata.resourceVersion, 1 }, { code, again.metadata.resourceVersion, again.metadata.generation })
    local _, patched = call(s, "PATCH", "/apis/apps/v1/namespaces/default/deployments/d",
      { spec = { replicas = json.null, template = { spec = { containers = { { name = "c", resources = {
        requests = { cpu = "500m" } } } } } } } }, "application/strategic-merge-patch+json")
    assert.are.same({ d.metadata.resourceVersion, 1 }, { patched.metadata.resourceVersion, patched.spec.replicas })
  end)

  it("seeds as it stores: a seeded object, new or replacing one, is defaulted and canonical (a Pod not admitted)", function()
    local s = new { crd = false }
    local q = { apiVersion = "v1", kind = "ResourceQuota", metadata = { name = "q", namespace = "default" },
      spec = { hard = { cpu = "0.5" } } }
    assert.are.equal("500m", s:seed(q).spec.hard.cpu)
    q.spec.hard.cpu = "1.5"
    assert.are.equal("1500m", s:seed(q).spec.hard.cpu)
    q.spec.hard.cpu = "1x"
    assert.matches("seed: ResourceQuota in version \"v1\" cannot be handled", select(2, pcall(s.seed, s, q)), 1, true)
    local pod = s:seed { apiVersion = "v1", kind = "Pod", metadata = { name = "p", namespace = "default" },
      spec = { containers = { { name = "c", image = "i:1" } } }, status = { phase = "Running" } }
    assert.are.same({ "IfNotPresent", "Running", "BestEffort" }, { pod.spec.containers[1].imagePullPolicy,
      pod.status.phase, pod.status.qosClass })
    assert.is_nil(pod.spec.serviceAccountName)
  end)

  it("defaults a Service, a NetworkPolicy, a Job (its selector from its uid), a CronJob, a Secret's stringData", function()
    local s = new { crd = false }
    local svc = post(s, NS .. "services", { apiVersion = "v1", kind = "Service", metadata = { name = "s" },
      spec = { selector = { app = "d" }, ports = { { port = 80 } } } })
    assert.matches("^%d+%.%d+%.%d+%.%d+$", svc.spec.clusterIP)
    assert.are.same({ svc.spec.clusterIP }, svc.spec.clusterIPs)
    svc.spec.clusterIP, svc.spec.clusterIPs = nil, nil
    assert.are.same({ internalTrafficPolicy = "Cluster", ipFamilies = { "IPv4" }, ipFamilyPolicy = "SingleStack",
      ports = { { port = 80, protocol = "TCP", targetPort = 80 } }, selector = { app = "d" }, sessionAffinity = "None",
      type = "ClusterIP" }, svc.spec)
    assert.are.same({ loadBalancer = {} }, svc.status)
    -- a PUT that leaves out the allocations keeps them: the cluster IPs, a nodePort by its port's name
    local nps = post(s, NS .. "services", { apiVersion = "v1", kind = "Service", metadata = { name = "np" },
      spec = { type = "NodePort", selector = { a = "b" }, ports = { { name = "http", port = 80 }, { name = "x", port = 81 } } } })
    local _, put = call(s, "PUT", NS .. "services/np", { apiVersion = "v1", kind = "Service",
      metadata = { name = "np", resourceVersion = nps.metadata.resourceVersion },
      spec = { type = "NodePort", selector = { a = "c" }, ports = { { name = "http", port = 80 }, { name = "y", port = 82 } } } })
    assert.are.same({ nps.spec.clusterIP, nps.spec.clusterIPs, nps.spec.ports[1].nodePort },
      { put.spec.clusterIP, put.spec.clusterIPs, put.spec.ports[1].nodePort })
    assert.is_number(put.spec.ports[2].nodePort)
    assert.are_not.equal(nps.spec.ports[2].nodePort, put.spec.ports[2].nodePort)
    local np = post(s, "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", { apiVersion = "networking.k8s.io/v1",
      kind = "NetworkPolicy", metadata = { name = "n" },
      spec = { podSelector = {}, ingress = { { ports = { { port = 80 } } } }, egress = { {} } } })
    assert.are.same({ { "Ingress", "Egress" }, "TCP" }, { np.spec.policyTypes, np.spec.ingress[1].ports[1].protocol })
    local job = post(s, "/apis/batch/v1/namespaces/default/jobs", { apiVersion = "batch/v1", kind = "Job",
      metadata = { name = "j" }, spec = { template = { spec = { restartPolicy = "Never",
        containers = { { name = "c", image = "busybox:latest" } } } } } })
    local uid = job.metadata.uid
    local labels = { ["batch.kubernetes.io/controller-uid"] = uid, ["batch.kubernetes.io/job-name"] = "j",
      ["controller-uid"] = uid, ["job-name"] = "j" }
    assert.are.same({ labels, labels, { matchLabels = { ["batch.kubernetes.io/controller-uid"] = uid } } },
      { job.metadata.labels, job.spec.template.metadata.labels, job.spec.selector })
    assert.are.same({ 6, "NonIndexed", 1, false, 1, "TerminatingOrFailed", false },
      { job.spec.backoffLimit, job.spec.completionMode, job.spec.completions, job.spec.manualSelector,
        job.spec.parallelism, job.spec.podReplacementPolicy, job.spec.suspend })
    local cj = post(s, "/apis/batch/v1/namespaces/default/cronjobs", { apiVersion = "batch/v1", kind = "CronJob",
      metadata = { name = "cj" }, spec = { schedule = "*/5 * * * *", jobTemplate = { spec = { template = { spec = {
        restartPolicy = "OnFailure", containers = { { name = "c", image = "busybox" } } } } } } } })
    assert.are.same({ "Allow", 1, 3, false, {}, {} }, { cj.spec.concurrencyPolicy, cj.spec.failedJobsHistoryLimit,
      cj.spec.successfulJobsHistoryLimit, cj.spec.suspend, cj.spec.jobTemplate.metadata,
      cj.spec.jobTemplate.spec.template.metadata })
    local secret = post(s, NS .. "secrets", { apiVersion = "v1", kind = "Secret", metadata = { name = "x" },
      stringData = { username = "demo", a = "ab" }, data = { x = "eHg=" } })
    assert.are.same({ { username = "ZGVtbw==", a = "YWI=", x = "eHg=" }, "Opaque" }, { secret.data, secret.type })
    assert.is_nil(secret.stringData)
  end)
end)
