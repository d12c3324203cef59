/* lbind_core.c - luaop.core, the C core as one Lua module.
 *
 * The luaop binary preloads it; `make` also builds it as a loadable module
 * (build/lua/luaop/core.so) so that specs can drive the core from busted. */
#include "lbind.h"

#include <string.h>

#include <lauxlib.h>

#include "counters.h"
#include "gcmem.h"
#include "runtime.h"
#include "sandbox.h"
#include "scheduler.h"
#include "str.h"
#include "version.h"

static const struct {
    const char *name;
    lua_CFunction open;
    int trusted; /* hands out credentials, or moves the clock: not where scripts run */
} lbind_core_modules[] = {
    {"json", lbind_json_open, 0},
    {"log", lbind_log_open, 0},
    {"kubeconfig", lbind_kubeconfig_open, 1},
    {"api", lbind_api_open, 0},
    {"task", lbind_task_open, 0},
    {"workqueue", lbind_workqueue_open, 0},
    {"fs", lbind_fs_open, 0},
    {"metrics", lbind_metrics_open, 0},
    {"check", lbind_check_open, 0},
    {"kit", lbind_kit_open, 1},
    {"yaml", lbind_yaml_open, 0},
    {"webhook", lbind_webhook_open, 0},
    {"shard", lbind_shard_open, 0},
};

/* core.traceback(msg [, level]): msg and the stack below level, as
 * debug.traceback makes it (scripts have no debug library). */
static int lbind_core_traceback(lua_State *L)
{
    const char *msg = luaL_optstring(L, 1, NULL);
    int level = (int)luaL_optinteger(L, 2, 1);

    luaL_traceback(L, L, msg, level);
    return 1;
}

/* core.counters() -> {undecodable_objects = N, budget_breaches = N} */
static int lbind_core_counters(lua_State *L)
{
    lua_createtable(L, 0, COUNTER_COUNT);
    for (int i = 0; i < COUNTER_COUNT; i++) {
        lua_pushinteger(L, (lua_Integer)counter_get(&runtime_of(L)->counters, (counter_id)i));
        lua_setfield(L, -2, counter_name((counter_id)i));
    }
    return 1;
}

/* core.bytes(s): a byte quantity as the command line reads one ("64Mi",
 * "500M", "4096": str_parse_bytes), or nil when malformed, zero or past
 * what a Lua integer holds; luaop.definition reads `memory =` with it */
static int lbind_core_bytes(lua_State *L)
{
    unsigned long long v;

    if (lua_type(L, 1) != LUA_TSTRING || str_parse_bytes(lua_tostring(L, 1), &v) != 0 ||
        v > (unsigned long long)LUA_MAXINTEGER || strlen(lua_tostring(L, 1)) != lua_rawlen(L, 1))
        lua_pushnil(L);
    else
        lua_pushinteger(L, (lua_Integer)v);
    return 1;
}

/* core.count(name [, n]): add to a counter (the runtime's Lua; not scripts) */
static int lbind_core_count(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    lua_Integer n = luaL_optinteger(L, 2, 1);

    luaL_argcheck(L, n >= 0, 2, "a count is never negative");
    for (int i = 0; i < COUNTER_COUNT; i++) {
        if (strcmp(name, counter_name((counter_id)i)) == 0) {
            counter_add(&runtime_of(L)->counters, (counter_id)i, (uint64_t)n);
            return 0;
        }
    }
    return luaL_argerror(L, 1, "no such counter");
}


/* core.gcmem_rearm() -> whether the collector's sentinel is armed, and
 * whether it had to be armed again (gcmem.h) */
static int lbind_core_gcmem_rearm(lua_State *L)
{
    int was = gcmem_armed_now();

    lua_pushboolean(L, gcmem_rearm(L));
    lua_pushboolean(L, !was);
    return 2;
}

/* core.gcmem_hold(on): no pages given back at a cycle's end while on
 * (gcmem.h; an informer's sync) */
static int lbind_core_gcmem_hold(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TBOOLEAN);
    gcmem_hold(lua_toboolean(L, 1));
    return 0;
}

/* The runtime a state gets when it loads luaop.core as a module (busted):
 * freed with the state. */
static int lbind_core_runtime_gc(lua_State *L)
{
    runtime **rt = lua_touserdata(L, 1);

    if (*rt) {
        sched_detach((*rt)->sched); /* the state outlives this finalizer */
        /* tasks still asleep are dropped, as the binary drops them at exit
         * (main.c): their timers would otherwise hold runtime_free's loop */
        lbind_task_shutdown(*rt);
        lbind_fs_shutdown(*rt);
        runtime_free(*rt);
    }
    *rt = NULL;
    return 0;
}

LUAMOD_API int luaopen_luaop_core(lua_State *L)
{
    if (runtime_get(L) == NULL) {
        runtime **rt = lua_newuserdatauv(L, sizeof *rt, 0);
        *rt = runtime_new();
        if (*rt == NULL)
            return luaL_error(L, "not enough memory");
        lua_newtable(L);
        lua_pushcfunction(L, lbind_core_runtime_gc);
        lua_setfield(L, -2, "__gc");
        lua_setmetatable(L, -2);
        lua_setfield(L, LUA_REGISTRYINDEX, "luaop.core.runtime");
        if (runtime_attach(*rt, L) != 0)
            return luaL_error(L, "not enough memory");
    }
    sandbox_open(L); /* what scripts get of it, the same in every state */
    lua_newtable(L);
    for (size_t i = 0; i < sizeof lbind_core_modules / sizeof lbind_core_modules[0]; i++) {
        if (runtime_of(L)->scripts && lbind_core_modules[i].trusted)
            continue;
        lbind_core_modules[i].open(L);
        if (lbind_core_modules[i].open == lbind_api_open)
            lbind_watch_add(L); /* api.watch: lbind_watch.c */
        lua_setfield(L, -2, lbind_core_modules[i].name);
    }
    lua_pushcfunction(L, lbind_core_traceback);
    lua_setfield(L, -2, "traceback");
    lua_pushcfunction(L, lbind_core_counters);
    lua_setfield(L, -2, "counters");
    lua_pushcfunction(L, lbind_core_count);
    lua_setfield(L, -2, "count");
    lua_pushcfunction(L, lbind_core_bytes);
    lua_setfield(L, -2, "bytes");
    lua_pushcfunction(L, lbind_core_gcmem_rearm);
    lua_setfield(L, -2, "gcmem_rearm");
    lua_pushcfunction(L, lbind_core_gcmem_hold);
    lua_setfield(L, -2, "gcmem_hold");
    lua_pushliteral(L, LUAOP_VERSION);
    lua_setfield(L, -2, "version");
    return 1;
}
