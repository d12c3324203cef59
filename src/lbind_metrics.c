/* lbind_metrics.c - the Lua face of metrics.c: luaop.core.metrics, the
 * runtime's Prometheus registry.
 *
 *   s, why = metrics.series(name, {label values, in the family's order} [, owner])
 *       charged to owner (none: the runtime's own). Raises for no such
 *       family or the wrong number of values; when the registry refuses
 *       the series (its owner at a cap or dropped, too many series), s is
 *       a handle that records nothing and why says so
 *   s:add([n])  s:set(v)  s:observe(v)  s:value() -> number
 *   t = s:start()  s:finish(t)     in-flight gauges (workqueue_unfinished_...)
 *   s:recorded() -> boolean        whether the registry keeps it (not refused,
 *                                  its owner not dropped)
 *   o = metrics.owner(name [, cap [, parent]])  an account of series (metrics.h):
 *       at most cap of them (nil or 0: no cap of its own) with its
 *       descendants', each charged to parent too
 *   o:drop()  its series and its descendants' leave the registry (also
 *       when o is collected)      o:count() -> series it holds
 *   f, why = metrics.custom{name =, help =, type = "counter"|"gauge"|"histogram",
 *       labels = {names}, buckets = {bounds}}   a family of a script's own
 *       (metrics.h); nil, why when the registry refuses its declaration
 *   s, why = f:series({label values, in its order} [, owner])   as metrics.series
 *   f:show() -> true | nil, why    in /metrics from now on
 *   f:shown() -> boolean   f:remove()  its series go, it leaves /metrics
 *       (also when f is collected)
 *   metrics.count() -> series in the registry
 *   metrics.ready(bool)            what /readyz answers
 *   metrics.healthy(bool)          false: /healthz fails (a task keeps dying)
 *   metrics.text() -> string       the whole registry, as /metrics serves it
 *   metrics.names() -> string      "family label,label" lines
 *
 * A handle refers to its series (metrics_get's reference, let go when it
 * is collected), never to a series it does not hold. */
#include "lbind.h"
#include "lbox.h"

#include <lauxlib.h>

#include "metrics.h"
#include "runtime.h"

#define LBIND_METRICS_MT "luaop.metrics.series"
#define LBIND_OWNER_MT "luaop.metrics.owner"
#define LBIND_CUSTOM_MT "luaop.metrics.custom"

typedef struct lbind_custom {
    metrics *m;
    metrics_custom *c; /* NULL once collected */
} lbind_custom;

typedef struct lbind_series {
    metrics *m;
    metrics_series *s; /* NULL: refused, records nothing */
} lbind_series;

typedef struct lbind_owner {
    metrics *m;
    metrics_owner *o; /* NULL once collected */
} lbind_owner;

static lbind_series *lbind_toseries(lua_State *L)
{
    return luaL_checkudata(L, 1, LBIND_METRICS_MT);
}

struct metrics_owner *lbind_metrics_owner(lua_State *L, int idx)
{
    lbind_owner *lo;

    if (lua_isnoneornil(L, idx))
        return NULL;
    lo = luaL_checkudata(L, idx, LBIND_OWNER_MT);
    if (lo->o == NULL)
        luaL_error(L, "the metrics owner is gone");
    return lo->o;
}

static int lbind_metrics_series(lua_State *L)
{
    runtime *rt = runtime_of(L);
    const char *name = luaL_checkstring(L, 1);
    const char *values[METRICS_MAX_LABELS];
    lua_Integer n;
    char err[160];
    lbind_series *ls;
    metrics_owner *owner = lbind_metrics_owner(L, 3);
    int want = metrics_family_labels(name);

    luaL_checktype(L, 2, LUA_TTABLE);
    n = (lua_Integer)lua_rawlen(L, 2);
    if (want < 0)
        return luaL_error(L, "no metric named %s", name);
    if (n != want)
        return luaL_error(L, "%s has %d label%s, not %d", name, want, want == 1 ? "" : "s", (int)n);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, 2, i) != LUA_TSTRING)
            return luaL_error(L, "label value %d of %s is not a string", (int)i, name);
        values[i - 1] = lua_tostring(L, -1); /* a string: anchored in the table, which stays at 2 */
        lua_pop(L, 1);
    }
    ls = lua_newuserdatauv(L, sizeof *ls, 0);
    ls->m = rt->metrics;
    ls->s = NULL;
    luaL_setmetatable(L, LBIND_METRICS_MT); /* collected from here on: the reference let go */
    ls->s = metrics_get(rt->metrics, owner, name, values, (size_t)n, err, sizeof err);
    if (ls->s)
        return 1;
    lua_pushstring(L, err);
    return 2;
}

static int lbind_series_gc(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);

    metrics_release(ls->m, ls->s);
    ls->s = NULL;
    return 0;
}

static int lbind_series_add(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);
    double n = luaL_optnumber(L, 2, 1);

    luaL_argcheck(L, n >= 0, 2, "a counter never goes down");
    if (ls->s)
        metrics_add(ls->m, ls->s, n);
    return 0;
}

static int lbind_series_set(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);
    double v = luaL_checknumber(L, 2);

    if (ls->s)
        metrics_set(ls->m, ls->s, v);
    return 0;
}

static int lbind_series_observe(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);
    double v = luaL_checknumber(L, 2);

    if (ls->s)
        metrics_observe(ls->m, ls->s, v);
    return 0;
}

static int lbind_series_value(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);

    lua_pushnumber(L, ls->s ? metrics_value(ls->m, ls->s) : 0);
    return 1;
}

static int lbind_series_recorded(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);

    lua_pushboolean(L, ls->s != NULL && metrics_linked(ls->m, ls->s));
    return 1;
}

static int lbind_series_start(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);
    double t = metrics_now();

    if (ls->s && metrics_inflight_start(ls->m, ls->s, t) != 0)
        return luaL_error(L, "not enough memory");
    lua_pushnumber(L, t);
    return 1;
}

static int lbind_series_finish(lua_State *L)
{
    lbind_series *ls = lbind_toseries(L);
    double t = luaL_checknumber(L, 2);

    if (ls->s)
        metrics_inflight_end(ls->m, ls->s, t);
    return 0;
}

static int lbind_metrics_owner_new(lua_State *L)
{
    runtime *rt = runtime_of(L);
    const char *name = luaL_checkstring(L, 1);
    lua_Integer cap = luaL_optinteger(L, 2, 0);
    metrics_owner *parent = lbind_metrics_owner(L, 3);
    lbind_owner *lo;

    luaL_argcheck(L, cap >= 0, 2, "a cap of 0 or more series");
    lo = lua_newuserdatauv(L, sizeof *lo, 1);
    lo->m = rt->metrics;
    lo->o = NULL;
    luaL_setmetatable(L, LBIND_OWNER_MT);
    lo->o = metrics_owner_new(rt->metrics, parent, name, (size_t)cap);
    if (lo->o == NULL)
        return luaL_error(L, "not enough memory");
    /* the parent's box lives as long as this one: its collection would
     * drop this owner's series with its own */
    lua_pushvalue(L, 3);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

static lbind_owner *lbind_toowner(lua_State *L)
{
    lbind_owner *lo = luaL_checkudata(L, 1, LBIND_OWNER_MT);

    if (lo->o == NULL)
        luaL_error(L, "the metrics owner is gone");
    return lo;
}

static int lbind_owner_drop(lua_State *L)
{
    lbind_owner *lo = lbind_toowner(L);

    metrics_owner_drop(lo->m, lo->o);
    return 0;
}

static int lbind_owner_count(lua_State *L)
{
    lbind_owner *lo = lbind_toowner(L);

    lua_pushinteger(L, (lua_Integer)metrics_owner_count(lo->m, lo->o));
    return 1;
}

/* collected: nobody can drop it any more, so its series go now */
static int lbind_owner_gc(lua_State *L)
{
    lbind_owner *lo = luaL_checkudata(L, 1, LBIND_OWNER_MT);

    if (lo->o) {
        metrics_owner_drop(lo->m, lo->o);
        metrics_owner_release(lo->m, lo->o);
        lo->o = NULL;
    }
    return 0;
}

/* Label values from the table at idx (strings, as many as want): into
 * values, anchored in the table. */
static void lbind_metrics_values(lua_State *L, int idx, const char *name, int want, const char **values)
{
    lua_Integer n;

    luaL_checktype(L, idx, LUA_TTABLE);
    n = (lua_Integer)lua_rawlen(L, idx);
    if (n != want)
        luaL_error(L, "%s has %d label%s, not %d", name, want, want == 1 ? "" : "s", (int)n);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, idx, i) != LUA_TSTRING)
            luaL_error(L, "label value %d of %s is not a string", (int)i, name);
        values[i - 1] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
}

static int lbind_metrics_custom_new(lua_State *L)
{
    runtime *rt = runtime_of(L);
    const char *name, *help, *type, *labels[METRICS_MAX_LABELS];
    double buckets[METRICS_MAX_BUCKETS];
    lua_Integer nlabels = 0, nbuckets = 0;
    char err[200];
    lbind_custom *lc;

    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getfield(L, 1, "name");
    lua_getfield(L, 1, "help");
    lua_getfield(L, 1, "type");
    name = luaL_checkstring(L, -3);
    help = luaL_checkstring(L, -2);
    type = luaL_checkstring(L, -1); /* (anchored on the stack) */
    if (lua_getfield(L, 1, "labels") == LUA_TTABLE) {
        nlabels = (lua_Integer)lua_rawlen(L, -1);
        if (nlabels > METRICS_MAX_LABELS)
            return luaL_error(L, "%s has %d labels, more than %d", name, (int)nlabels, METRICS_MAX_LABELS);
        for (lua_Integer i = 1; i <= nlabels; i++) {
            if (lua_rawgeti(L, -1, i) != LUA_TSTRING)
                return luaL_error(L, "label name %d of %s is not a string", (int)i, name);
            labels[i - 1] = lua_tostring(L, -1);
            lua_pop(L, 1);
        }
    }
    if (lua_getfield(L, 1, "buckets") == LUA_TTABLE) {
        nbuckets = (lua_Integer)lua_rawlen(L, -1);
        if (nbuckets > METRICS_MAX_BUCKETS)
            return luaL_error(L, "%s has %d buckets, more than %d", name, (int)nbuckets, METRICS_MAX_BUCKETS);
        for (lua_Integer i = 1; i <= nbuckets; i++) {
            int ok;
            lua_rawgeti(L, -1, i);
            buckets[i - 1] = lua_tonumberx(L, -1, &ok);
            lua_pop(L, 1);
            if (!ok)
                return luaL_error(L, "bucket %d of %s is not a number", (int)i, name);
        }
    }
    lc = lua_newuserdatauv(L, sizeof *lc, 0);
    lc->m = rt->metrics;
    lc->c = NULL;
    luaL_setmetatable(L, LBIND_CUSTOM_MT);
    lc->c = metrics_custom_new(rt->metrics, name, help, type, labels, (size_t)nlabels, buckets, (size_t)nbuckets,
                               err, sizeof err);
    if (lc->c)
        return 1;
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
}

static lbind_custom *lbind_tocustom(lua_State *L)
{
    lbind_custom *lc = luaL_checkudata(L, 1, LBIND_CUSTOM_MT);

    if (lc->c == NULL)
        luaL_error(L, "the metric is gone");
    return lc;
}

static int lbind_custom_series(lua_State *L)
{
    lbind_custom *lc = lbind_tocustom(L);
    const char *values[METRICS_MAX_LABELS];
    metrics_owner *owner = lbind_metrics_owner(L, 3);
    lbind_series *ls;
    char err[200];
    int n;

    luaL_checktype(L, 2, LUA_TTABLE);
    n = (int)lua_rawlen(L, 2);
    luaL_argcheck(L, n <= METRICS_MAX_LABELS, 2, "too many label values");
    lbind_metrics_values(L, 2, "the metric", n, values);
    ls = lua_newuserdatauv(L, sizeof *ls, 0);
    ls->m = lc->m;
    ls->s = NULL;
    luaL_setmetatable(L, LBIND_METRICS_MT);
    ls->s = metrics_custom_get(lc->m, lc->c, owner, values, (size_t)n, err, sizeof err);
    if (ls->s)
        return 1;
    lua_pushstring(L, err);
    return 2;
}

static int lbind_custom_show(lua_State *L)
{
    lbind_custom *lc = lbind_tocustom(L);
    char err[200];

    if (metrics_custom_show(lc->m, lc->c, err, sizeof err) == 0) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
}

static int lbind_custom_shown(lua_State *L)
{
    lbind_custom *lc = lbind_tocustom(L);

    lua_pushboolean(L, metrics_custom_shown(lc->m, lc->c));
    return 1;
}

static int lbind_custom_remove(lua_State *L)
{
    lbind_custom *lc = lbind_tocustom(L);

    metrics_custom_remove(lc->m, lc->c);
    return 0;
}

/* collected: nobody can remove it any more, so it goes now */
static int lbind_custom_gc(lua_State *L)
{
    lbind_custom *lc = luaL_checkudata(L, 1, LBIND_CUSTOM_MT);

    if (lc->c) {
        metrics_custom_remove(lc->m, lc->c);
        metrics_custom_release(lc->m, lc->c);
        lc->c = NULL;
    }
    return 0;
}

static int lbind_metrics_count(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)metrics_count(runtime_of(L)->metrics));
    return 1;
}

static int lbind_metrics_ready(lua_State *L)
{
    atomic_store(&runtime_of(L)->ready, lua_toboolean(L, 1));
    return 0;
}

static int lbind_metrics_healthy(lua_State *L)
{
    atomic_store(&runtime_of(L)->failing, !lua_toboolean(L, 1));
    return 0;
}

/* Push the text made in b (a box of the call: freed however it ends), or
 * raise when it could not be made. */
static int lbind_metrics_push(lua_State *L, const dbuf *b, int rc)
{
    if (rc != 0)
        return luaL_error(L, "not enough memory");
    lua_pushlstring(L, b->data ? b->data : "", b->len);
    return 1;
}

static int lbind_metrics_text(lua_State *L)
{
    runtime *rt = runtime_of(L);
    dbuf *b = lbox_push(L);

    return lbind_metrics_push(L, b, metrics_write(rt->metrics, metrics_now(), b));
}

static int lbind_metrics_names(lua_State *L)
{
    dbuf *b = lbox_push(L);

    return lbind_metrics_push(L, b, metrics_names(b));
}

int lbind_metrics_open(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"add", lbind_series_add},     {"set", lbind_series_set},         {"observe", lbind_series_observe},
        {"value", lbind_series_value}, {"start", lbind_series_start},     {"finish", lbind_series_finish},
        {"recorded", lbind_series_recorded}, {NULL, NULL},
    };
    static const luaL_Reg owner_methods[] = {
        {"drop", lbind_owner_drop},
        {"count", lbind_owner_count},
        {NULL, NULL},
    };
    static const luaL_Reg custom_methods[] = {
        {"series", lbind_custom_series}, {"show", lbind_custom_show},   {"shown", lbind_custom_shown},
        {"remove", lbind_custom_remove}, {NULL, NULL},
    };
    static const luaL_Reg funcs[] = {
        {"custom", lbind_metrics_custom_new}, {"series", lbind_metrics_series}, {"owner", lbind_metrics_owner_new}, {"count", lbind_metrics_count},
        {"ready", lbind_metrics_ready},   {"healthy", lbind_metrics_healthy},   {"text", lbind_metrics_text},       {"names", lbind_metrics_names},
        {NULL, NULL},
    };

    lbind_class(L, LBIND_METRICS_MT, methods, lbind_series_gc, NULL);
    lbind_class(L, LBIND_OWNER_MT, owner_methods, lbind_owner_gc, NULL);
    lbind_class(L, LBIND_CUSTOM_MT, custom_methods, lbind_custom_gc, NULL);
    luaL_newlib(L, funcs);
    return 1;
}
