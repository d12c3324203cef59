/* lbind_workqueue.c - the Lua face of workqueue.c: luaop.core.workqueue.
 *
 *   q = workqueue.new({base_delay =, max_delay =, qps =, burst =} [, now])
 *       (defaults: client-go's 0.005, 1000, 10, 100)
 *   q:add(key)  q:add_after(key, seconds [, now])  q:add_rate_limited(key [, now])
 *   q:when(key [, now]) -> seconds       q:forget(key)   q:requeues(key) -> n
 *   q:get() -> key | nil                 q:done(key)
 *   q:tick([now])  q:next_ready() -> time | nil
 *   q:shutdown()  q:shutting_down() -> boolean
 *   q:stats() -> {depth, waiting, processing, adds, retries}
 *
 * `now` is seconds on a monotonic clock; it defaults to the loop's clock,
 * and specs pass their own to drive time by hand. Bad arguments raise. */
#include "lbind.h"

#include <lauxlib.h>
#include <uv.h>

#include "workqueue.h"

#define LBIND_WQ_MT "luaop.workqueue"

typedef struct lbind_wq {
    workqueue *q;
} lbind_wq;

static workqueue *lbind_wq_check(lua_State *L)
{
    lbind_wq *w = luaL_checkudata(L, 1, LBIND_WQ_MT);

    if (w->q == NULL)
        luaL_error(L, "the work queue is closed");
    return w->q;
}

static double lbind_wq_now(lua_State *L, int idx)
{
    return lua_isnoneornil(L, idx) ? (double)uv_hrtime() / 1e9 : luaL_checknumber(L, idx);
}

static int lbind_wq_oom(lua_State *L, int rc)
{
    if (rc != 0)
        return luaL_error(L, "not enough memory");
    return 0;
}

static double lbind_wq_field(lua_State *L, const char *key, double def)
{
    double v = def;

    if (lua_getfield(L, 1, key) != LUA_TNIL)
        v = luaL_checknumber(L, -1);
    lua_pop(L, 1);
    return v;
}

static int lbind_wq_new(lua_State *L)
{
    workqueue_opts o;
    lbind_wq *w;
    double now = lbind_wq_now(L, 2);

    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_newtable(L);
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    o.base_delay = lbind_wq_field(L, "base_delay", 0.005);
    o.max_delay = lbind_wq_field(L, "max_delay", 1000);
    o.qps = lbind_wq_field(L, "qps", 10);
    o.burst = (int)lbind_wq_field(L, "burst", 100);
    if (o.base_delay < 0 || o.max_delay < o.base_delay)
        return luaL_error(L, "need 0 <= base_delay <= max_delay");
    w = lua_newuserdatauv(L, sizeof *w, 0);
    w->q = NULL;
    luaL_setmetatable(L, LBIND_WQ_MT);
    w->q = workqueue_new(&o, now);
    if (w->q == NULL)
        return luaL_error(L, "not enough memory");
    return 1;
}

static int lbind_wq_add(lua_State *L)
{
    return lbind_wq_oom(L, workqueue_add(lbind_wq_check(L), luaL_checkstring(L, 2)));
}

static int lbind_wq_add_after(lua_State *L)
{
    workqueue *q = lbind_wq_check(L);

    return lbind_wq_oom(L, workqueue_add_after(q, luaL_checkstring(L, 2), luaL_checknumber(L, 3),
                                               lbind_wq_now(L, 4)));
}

static int lbind_wq_add_rate_limited(lua_State *L)
{
    workqueue *q = lbind_wq_check(L);

    return lbind_wq_oom(L, workqueue_add_rate_limited(q, luaL_checkstring(L, 2), lbind_wq_now(L, 3)));
}

static int lbind_wq_when(lua_State *L)
{
    workqueue *q = lbind_wq_check(L);

    lua_pushnumber(L, workqueue_when(q, luaL_checkstring(L, 2), lbind_wq_now(L, 3)));
    return 1;
}

static int lbind_wq_forget(lua_State *L)
{
    workqueue_forget(lbind_wq_check(L), luaL_checkstring(L, 2));
    return 0;
}

static int lbind_wq_requeues(lua_State *L)
{
    lua_pushinteger(L, workqueue_requeues(lbind_wq_check(L), luaL_checkstring(L, 2)));
    return 1;
}

static int lbind_wq_get(lua_State *L)
{
    const char *key = workqueue_get(lbind_wq_check(L));

    if (key)
        lua_pushstring(L, key);
    else
        lua_pushnil(L);
    return 1;
}

static int lbind_wq_done(lua_State *L)
{
    workqueue_done(lbind_wq_check(L), luaL_checkstring(L, 2));
    return 0;
}

static int lbind_wq_tick(lua_State *L)
{
    workqueue_tick(lbind_wq_check(L), lbind_wq_now(L, 2));
    return 0;
}

static int lbind_wq_next_ready(lua_State *L)
{
    double t = workqueue_next_ready(lbind_wq_check(L));

    if (t < 0)
        lua_pushnil(L);
    else
        lua_pushnumber(L, t);
    return 1;
}

static int lbind_wq_shutdown(lua_State *L)
{
    workqueue_shutdown(lbind_wq_check(L));
    return 0;
}

static int lbind_wq_shutting_down(lua_State *L)
{
    lua_pushboolean(L, workqueue_shutting_down(lbind_wq_check(L)));
    return 1;
}

static int lbind_wq_stats(lua_State *L)
{
    workqueue_stats s;

    workqueue_stats_get(lbind_wq_check(L), &s);
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, (lua_Integer)s.depth);
    lua_setfield(L, -2, "depth");
    lua_pushinteger(L, (lua_Integer)s.waiting);
    lua_setfield(L, -2, "waiting");
    lua_pushinteger(L, (lua_Integer)s.processing);
    lua_setfield(L, -2, "processing");
    lua_pushinteger(L, (lua_Integer)s.adds);
    lua_setfield(L, -2, "adds");
    lua_pushinteger(L, (lua_Integer)s.retries);
    lua_setfield(L, -2, "retries");
    return 1;
}

static int lbind_wq_gc(lua_State *L)
{
    lbind_wq *w = luaL_checkudata(L, 1, LBIND_WQ_MT);

    workqueue_free(w->q);
    w->q = NULL;
    return 0;
}

int lbind_workqueue_open(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"add", lbind_wq_add},
        {"add_after", lbind_wq_add_after},
        {"add_rate_limited", lbind_wq_add_rate_limited},
        {"when", lbind_wq_when},
        {"forget", lbind_wq_forget},
        {"requeues", lbind_wq_requeues},
        {"get", lbind_wq_get},
        {"done", lbind_wq_done},
        {"tick", lbind_wq_tick},
        {"next_ready", lbind_wq_next_ready},
        {"shutdown", lbind_wq_shutdown},
        {"shutting_down", lbind_wq_shutting_down},
        {"stats", lbind_wq_stats},
        {NULL, NULL},
    };
    static const luaL_Reg funcs[] = {
        {"new", lbind_wq_new},
        {NULL, NULL},
    };

    lbind_class(L, LBIND_WQ_MT, methods, lbind_wq_gc, NULL);
    luaL_newlib(L, funcs);
    return 1;
}
