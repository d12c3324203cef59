/* lbind_metrics.c - the Lua face of metrics.c: luaop.core.metrics, the
 * runtime's Prometheus registry.
 *
 *   s = metrics.series(name, {label values, in the family's order})
 *       (raises: no such family, the wrong number of values, too many series)
 *   s:add([n])  s:set(v)  s:observe(v)  s:value() -> number
 *   t = s:start()  s:finish(t)     in-flight gauges (workqueue_unfinished_...)
 *   metrics.ready(bool)            what /readyz answers
 *   metrics.text() -> string       the whole registry, as /metrics serves it
 *   metrics.names() -> string      "family label,label" lines */
#include "lbind.h"

#include <lauxlib.h>

#include "metrics.h"
#include "runtime.h"

#define LBIND_METRICS_MT "luaop.metrics.series"

typedef struct lbind_series {
    metrics *m;
    metrics_series *s;
} lbind_series;

static lbind_series *lbind_toseries(lua_State *L)
{
    return luaL_checkudata(L, 1, LBIND_METRICS_MT);
}

static int lbind_metrics_series(lua_State *L)
{
    runtime *rt = runtime_of(L);
    const char *name = luaL_checkstring(L, 1);
    const char *values[4];
    lua_Integer n;
    char err[160];
    lbind_series *ls;

    luaL_checktype(L, 2, LUA_TTABLE);
    n = luaL_len(L, 2);
    luaL_argcheck(L, n >= 0 && n <= 4, 2, "at most 4 label values");
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i);
        values[i - 1] = luaL_checkstring(L, -1); /* anchored in the table */
        lua_pop(L, 1);
    }
    ls = lua_newuserdatauv(L, sizeof *ls, 0);
    ls->m = rt->metrics;
    ls->s = metrics_get(rt->metrics, name, values, (size_t)n, err, sizeof err);
    if (ls->s == NULL)
        return luaL_error(L, "%s", err);
    luaL_setmetatable(L, LBIND_METRICS_MT);
    return 1;
}

static int lbind_series_add(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);
    double n = luaL_optnumber(L, 2, 1);

    luaL_argcheck(L, n >= 0, 2, "a counter never goes down");
    metrics_add(ls->m, ls->s, n);
    return 0;
}

static int lbind_series_set(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);

    metrics_set(ls->m, ls->s, luaL_checknumber(L, 2));
    return 0;
}

static int lbind_series_observe(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);

    metrics_observe(ls->m, ls->s, luaL_checknumber(L, 2));
    return 0;
}

static int lbind_series_value(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);

    lua_pushnumber(L, metrics_value(ls->m, ls->s));
    return 1;
}

static int lbind_series_start(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);
    double t = metrics_now();

    if (metrics_inflight_start(ls->m, ls->s, t) != 0)
        return luaL_error(L, "not enough memory");
    lua_pushnumber(L, t);
    return 1;
}

static int lbind_series_finish(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);

    metrics_inflight_end(ls->m, ls->s, luaL_checknumber(L, 2));
    return 0;
}

static int lbind_metrics_ready(lua_State *L)
{
    atomic_store(&runtime_of(L)->ready, lua_toboolean(L, 1));
    return 0;
}

/* Push the text in b (freed), or raise when it could not be made. */
static int lbind_metrics_push(lua_State *L, dbuf *b, int rc)
{
    if (rc != 0) {
        dbuf_free(b);
        return luaL_error(L, "not enough memory");
    }
    lua_pushlstring(L, b->data ? b->data : "", b->len);
    dbuf_free(b);
    return 1;
}

static int lbind_metrics_text(lua_State *L)
{
    dbuf b = {0};

    return lbind_metrics_push(L, &b, metrics_write(runtime_of(L)->metrics, metrics_now(), &b));
}

static int lbind_metrics_names(lua_State *L)
{
    dbuf b = {0};

    return lbind_metrics_push(L, &b, metrics_names(&b));
}

int lbind_metrics_open(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"add", lbind_series_add},     {"set", lbind_series_set},       {"observe", lbind_series_observe},
        {"value", lbind_series_value}, {"start", lbind_series_start},   {"finish", lbind_series_finish},
        {NULL, NULL},
    };
    static const luaL_Reg funcs[] = {
        {"series", lbind_metrics_series}, {"ready", lbind_metrics_ready}, {"text", lbind_metrics_text},
        {"names", lbind_metrics_names},   {NULL, NULL},
    };

    lbind_class(L, LBIND_METRICS_MT, methods, NULL, NULL);
    luaL_newlib(L, funcs);
    return 1;
}
