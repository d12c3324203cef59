/* lbind_api.c - the Lua face of api.c: luaop.core.api. Functions that wait
 * yield the calling task (lbind_task.c).
 *
 *   api.request{method =, path =, body =, content_type =, accept =, timeout =}
 *     -> status, body, content_type | nil, err       (yields)
 *   api.start{...as request} -> r, the request under way;  r:wait() -> what
 *     api.request returns (yields until the answer; an answer that came
 *     first waits in C memory, so no Lua object outlives it);
 *     r:answered() -> whether it is over: answered, or cancelled (without
 *     waiting); r:cancel() drops it, as does collecting it unanswered
 *   api.watch{path =, timeout =, accept =, shard =} -> a watch (see lbind_watch.c)
 *   api.info() -> {server =, namespace =}
 *   api.requests() -> requests started so far (retries included)
 *   api.fence(lease_path) -> key   api.fence_until(seconds on task.now's
 *     clock): leader election's fence on writes (api.h); only a request
 *     made with {lease = key} (the latest key fence handed out) is the
 *     election's own, and only such a create or renew of the Lease leaves
 *     while fenced */
#include "lbind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <uv.h>

#include "api.h"
#include "runtime.h"
#include "scheduler.h"
#include "str.h"

/* The API server of L's runtime; raises when none is configured. */
static api *lbind_api_of(lua_State *L)
{
    api *a = runtime_of(L)->api;

    if (a == NULL)
        luaL_error(L, "no API server is configured");
    return a;
}

/* ---- api ------------------------------------------------------------------ */

#define LBIND_PENDING_MT "luaop.api.pending"

/* Push an answer as api.request returns it; the number of values. */
static int lbind_push_answer(lua_State *L, int status, const char *body, size_t body_len,
                             const char *content_type, const char *error)
{
    if (status == 0) {
        lua_pushnil(L);
        lua_pushstring(L, error ? error : "request failed");
        return 2;
    }
    lua_pushinteger(L, status);
    lua_pushlstring(L, body ? body : "", body_len);
    if (content_type)
        lua_pushstring(L, content_type);
    else
        lua_pushnil(L);
    return 3;
}

/* The userdata of api.start. */
typedef struct lbind_pending {
    api_call *call;     /* while under way */
    sched_wait waiter;  /* of the task in r:wait() */
    int taken;          /* r:wait() was called */
    int status;         /* an answer kept until r:wait() */
    char *body;
    size_t body_len;
    char *content_type;
    char *error;
} lbind_pending;

static void lbind_pending_clear(lbind_pending *p)
{
    free(p->body);
    free(p->content_type);
    free(p->error);
    p->body = p->content_type = p->error = NULL;
}

static void lbind_pending_done(const http_response *r, void *ud)
{
    lbind_pending *p = ud;
    sched_wait w = p->waiter;
    lua_State *co = sched_waiting(w);

    p->call = NULL; /* before anything that may run a collection */
    p->waiter = (sched_wait){0};
    if (co) {
        sched_wake(w, lbind_push_answer(co, r->status, r->body, r->body_len, r->content_type, r->error));
        return;
    }
    p->status = r->status;
    if (r->status == 0) {
        p->error = str_dup(r->error ? r->error : "request failed");
        return;
    }
    p->body = str_ndup(r->body ? r->body : "", r->body ? r->body_len : 0);
    p->body_len = r->body ? r->body_len : 0;
    p->content_type = str_dup(r->content_type);
    if (p->body == NULL || (r->content_type && p->content_type == NULL)) {
        lbind_pending_clear(p);
        p->status = 0; /* error NULL: "request failed" */
    }
}

/* The pending at 1 (raises when it is not one). */
static lbind_pending *lbind_topending(lua_State *L)
{
    return luaL_checkudata(L, 1, LBIND_PENDING_MT);
}

/* r:answered(): whether the request is over (its answer kept for r:wait()
 * or taken, or it was cancelled), without waiting for it. */
static int lbind_pending_answered(lua_State *L)
{
    lua_pushboolean(L, lbind_topending(L)->call == NULL);
    return 1;
}

static int lbind_pending_wait(lua_State *L)
{
    lbind_pending *p = lbind_topending(L);
    int n;

    lbind_check_task(L, "a request's wait");
    if (p->taken)
        return luaL_error(L, "this request's answer was taken already");
    p->taken = 1;
    if (p->call) {
        /* p, at 1, stays on the waiting stack: alive until the answer */
        lua_settop(L, 1);
        p->waiter = sched_wait_begin(L);
        return sched_wait_yield(L, 0, NULL);
    }
    n = lbind_push_answer(L, p->status, p->body, p->body_len, p->content_type, p->error);
    lbind_pending_clear(p);
    return n;
}

/* The request stops, its answer is dropped. */
static void lbind_pending_drop(lbind_pending *p)
{
    p->waiter = (sched_wait){0};
    if (p->call) {
        api_cancel(p->call);
        p->call = NULL;
    }
    p->taken = 1;
    lbind_pending_clear(p);
}

static int lbind_pending_cancel(lua_State *L)
{
    lbind_pending *p = lbind_topending(L);

    if (sched_waiting(p->waiter))
        return luaL_error(L, "a task is waiting for this request");
    lbind_pending_drop(p);
    return 0;
}

/* collected: nobody can wait for it any more (at exit, a waiter too) */
static int lbind_pending_gc(lua_State *L)
{
    lbind_pending_drop(lbind_topending(L));
    return 0;
}

#define LBIND_LEASE_KEY_MT "luaop.api.lease_key"
#define LBIND_LEASE_KEY "luaop.api.lease_key.current" /* the registry's field: the latest key */

/* The spec's lease mark: field lease, when given, must be the key the
 * last api.fence handed out (compared by identity, in the registry). */
static int lbind_api_lease(lua_State *L)
{
    int mine;

    if (lbind_rawfield(L, 1, "lease") == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    lua_getfield(L, LUA_REGISTRYINDEX, LBIND_LEASE_KEY);
    mine = lua_rawequal(L, -1, -2); /* the registry's key is one api.fence made */
    lua_pop(L, 2);
    if (!mine)
        luaL_error(L, "field lease must be the key api.fence handed out");
    return 1;
}

static const char *lbind_opt(lua_State *L, const char *key, size_t *len)
{
    const char *s = NULL;
    int t;

    t = lbind_rawfield(L, 1, key); /* the string is the table's */

    if (t != LUA_TNIL && t != LUA_TSTRING)
        luaL_error(L, "field %s must be a string", key);
    if (t == LUA_TSTRING)
        s = lua_tolstring(L, -1, len);
    lua_pop(L, 1); /* a string the table holds stays alive */
    return s;
}

/* The spec in the table at 1 (its strings stay alive in the table). */
static void lbind_api_spec(lua_State *L, api_spec *s, const char *what)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    s->method = lbind_opt(L, "method", NULL);
    s->path = lbind_opt(L, "path", NULL);
    s->content_type = lbind_opt(L, "content_type", NULL);
    s->accept = lbind_opt(L, "accept", NULL);
    s->body = lbind_opt(L, "body", &s->body_len);
    if (s->path == NULL || s->path[0] != '/')
        luaL_error(L, "%s needs a path that starts with /", what);
    s->lease = lbind_api_lease(L);
    s->keyed = sched_mark(L, &s->shard); /* the running task's, never the table's */
    if (lbind_rawfield(L, 1, "timeout") != LUA_TNIL)
        s->timeout_ms = (long)(luaL_checknumber(L, -1) * 1000);
    lua_pop(L, 1);
}

static int lbind_api_begin(lua_State *L, const char *what)
{
    api_spec s = {0};
    lbind_pending *p;

    lbind_api_spec(L, &s, what);
    api *a = lbind_api_of(L);
    p = lua_newuserdatauv(L, sizeof *p, 0);
    memset(p, 0, sizeof *p);
    luaL_setmetatable(L, LBIND_PENDING_MT);
    p->call = api_request(a, &s, lbind_pending_done, p);
    if (p->call == NULL)
        return luaL_error(L, "not enough memory");
    return 1;
}

static int lbind_api_start(lua_State *L)
{
    return lbind_api_begin(L, "api.start");
}

/* A request begun as api.start's and waited for: its answer is kept by the
 * request's userdata, which the waiting stack holds, so nothing that
 * answers keeps a pointer to the task. */
static int lbind_api_request(lua_State *L)
{
    lbind_check_task(L, "api.request");
    lbind_api_begin(L, "api.request");
    lua_replace(L, 1);
    return lbind_pending_wait(L);
}

static int lbind_api_info(lua_State *L)
{
    api *a = lbind_api_of(L);

    lua_createtable(L, 0, 2);
    lua_pushstring(L, api_server(a));
    lua_setfield(L, -2, "server");
    lua_pushstring(L, api_namespace(a));
    lua_setfield(L, -2, "namespace");
    return 1;
}

/* api.fence(lease_path) -> key: writes leave only while the lease is
 * ours, but the election's own requests, made with {lease = key} (api.h).
 * A later call hands out a new key; the old one is refused. */
static int lbind_api_fence(lua_State *L)
{
    api *a = lbind_api_of(L);
    const char *path = luaL_checkstring(L, 1);

    /* the key first: what can fail (Lua's allocations, then the fence's)
     * fails before the fence names a path the key does not go with */
    lua_newuserdatauv(L, 1, 0);
    luaL_setmetatable(L, LBIND_LEASE_KEY_MT);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, LBIND_LEASE_KEY);
    if (api_fence(a, path) != 0)
        return luaL_error(L, "not enough memory");
    return 1;
}

/* api.fence_until(seconds): writes may leave until then (task.now's clock) */
static int lbind_api_fence_until(lua_State *L)
{
    double t = luaL_checknumber(L, 1);

    api_fence_until(lbind_api_of(L), t > 0 && t < 1e10 ? (uint64_t)(t * 1e9) : 0);
    return 0;
}

static int lbind_api_requests(lua_State *L)
{
    api *a = runtime_of(L)->api;

    lua_pushinteger(L, a ? (lua_Integer)api_requests_total(a) : 0);
    return 1;
}

static int lbind_api_exec_runs(lua_State *L)
{
    api *a = runtime_of(L)->api;

    lua_pushinteger(L, a ? (lua_Integer)api_exec_runs(a) : 0);
    return 1;
}

static const luaL_Reg lbind_api_funcs[] = {
    {"request", lbind_api_request},
    {"start", lbind_api_start},
    {"info", lbind_api_info},
    {"fence", lbind_api_fence},
    {"fence_until", lbind_api_fence_until},
    {"requests", lbind_api_requests},
    {"exec_runs", lbind_api_exec_runs},
    {NULL, NULL},
};

int lbind_api_open(lua_State *L)
{
    static const luaL_Reg pending_methods[] = {
        {"wait", lbind_pending_wait},
        {"answered", lbind_pending_answered},
        {"cancel", lbind_pending_cancel},
        {NULL, NULL},
    };

    static const luaL_Reg no_methods[] = {{NULL, NULL}};

    lbind_class(L, LBIND_PENDING_MT, pending_methods, lbind_pending_gc, NULL);
    lbind_class(L, LBIND_LEASE_KEY_MT, no_methods, NULL, NULL);
    luaL_newlib(L, lbind_api_funcs);
    return 1;
}
