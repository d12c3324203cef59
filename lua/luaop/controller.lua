-- luaop.controller - controllers as controller-runtime builds them: a
-- resource (the For), owned kinds whose events enqueue their controller
-- owner, watched kinds with a map function, shared informers, one
-- rate-limited work queue per controller, and `concurrency` workers, each
-- reconcile in a task of its own.
--
-- reconcile(ctx, req) returns nothing (done), luaop.requeue_after(seconds),
-- or luaop.requeue(); raising means "retry with backoff" and is logged with
-- the Lua traceback.
--
-- In rooms of their own: luaop.definition (validation, budgets, what
-- reconcile returns), luaop.context (ctx), luaop.manager (informers,
-- controllers, start, stop, reload), luaop.plan (subscriptions) and
-- luaop.worker (workers, resync). This module is luaop.definition with
-- manager() added: its limits (MAX_INSTRUCTIONS, ...) are that module's.
local M = require "luaop.definition"

M.manager = require("luaop.manager").new
M.SYNC_TIMEOUT = require("luaop.manager").SYNC_TIMEOUT

return M
