/* sandbox.c - what a luaop script may not do (see sandbox.h). */
#include "sandbox.h"

#include <stdatomic.h>
#include <string.h>

#include <lauxlib.h>

static int sandbox_refuse(lua_State *L)
{
    return luaL_error(L, "%s is not available to luaop scripts", lua_tostring(L, lua_upvalueindex(1)));
}

/* t[field] = a function that raises, naming `name`. */
static void sandbox_stub(lua_State *L, int t, const char *field, const char *name)
{
    lua_pushstring(L, name);
    lua_pushcclosure(L, sandbox_refuse, 1);
    lua_setfield(L, t, field);
}

/* Replace the global function `name` by one that forces text mode: the
 * argument at `mode_arg` must be nil or "t". */
static int sandbox_text_only(lua_State *L)
{
    int mode_arg = (int)lua_tointeger(L, lua_upvalueindex(2));
    int n = lua_gettop(L);

    if (n >= mode_arg && !lua_isnil(L, mode_arg)) {
        const char *mode = luaL_checkstring(L, mode_arg);
        if (strchr(mode, 'b'))
            return luaL_error(L, "binary chunks are not available to luaop scripts");
    }
    if (n < mode_arg)
        lua_settop(L, mode_arg);
    lua_pushliteral(L, "t");
    lua_replace(L, mode_arg);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

static void sandbox_wrap_load(lua_State *L, const char *name, int mode_arg)
{
    lua_getglobal(L, name);
    lua_pushinteger(L, mode_arg);
    lua_pushcclosure(L, sandbox_text_only, 2);
    lua_setglobal(L, name);
}

/* dofile has no mode argument: load the file as text, then run it. */
static int sandbox_dofile(lua_State *L)
{
    const char *path = luaL_optstring(L, 1, NULL);

    lua_settop(L, 1);
    if (luaL_loadfilex(L, path, "t") != LUA_OK)
        return lua_error(L);
    lua_call(L, 0, LUA_MULTRET);
    return lua_gettop(L) - 1;
}

static _Atomic(lua_CFunction) sandbox_base_collectgarbage;

/* A script's collectgarbage: "collect", "count", "step" and "isrunning"
 * only (the others change the collector every script shares). In C, so
 * that what the call is charged (charge_lib.h) and its errors name the
 * script's line, not a wrapper's. */
static int sandbox_collectgarbage(lua_State *L)
{
    static const char *const allowed[] = { "collect", "count", "step", "isrunning" };
    const char *opt = luaL_optstring(L, 1, "collect");

    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (strcmp(opt, allowed[i]) == 0)
            return atomic_load(&sandbox_base_collectgarbage)(L);
    return luaL_error(L, "collectgarbage option %s is not available to luaop scripts", opt);
}

static _Atomic(lua_CFunction) sandbox_base_load;

/* A script's load: text only, into the script's environment (upvalue 1)
 * unless it passes one; Lua's load called directly, so that what parsing
 * is charged (charge_lib.h) and its errors name the script's line. */
static int sandbox_env_load(lua_State *L)
{
    if (!lua_isnoneornil(L, 3)) {
        const char *mode = lua_tostring(L, 3);
        if (mode == NULL || strcmp(mode, "t") != 0)
            return luaL_error(L, "binary chunks are not available to luaop scripts");
    }
    lua_settop(L, 4);
    lua_pushliteral(L, "t");
    lua_replace(L, 3);
    if (!lua_toboolean(L, 4)) { /* as `e or env` */
        lua_pushvalue(L, lua_upvalueindex(1));
        lua_replace(L, 4);
    }
    return atomic_load(&sandbox_base_load)(L);
}

/* sandbox.loader(env): a script's load, for the script whose environment
 * is env */
static int sandbox_loader(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_pushcclosure(L, sandbox_env_load, 1);
    return 1;
}

void sandbox_open(lua_State *L)
{
    lua_CFunction base;

    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    if (lua_getfield(L, -1, "luaop.sandbox") != LUA_TNIL) {
        lua_pop(L, 2);
        return;
    }
    lua_pop(L, 1);
    /* Lua's own functions (the same in every state of the process), before
     * sandbox_apply wraps the globals */
    lua_getglobal(L, "collectgarbage");
    base = lua_tocfunction(L, -1);
    if (base != NULL && base != sandbox_collectgarbage)
        atomic_store(&sandbox_base_collectgarbage, base);
    lua_getglobal(L, "load");
    base = lua_tocfunction(L, -1);
    if (base != NULL && base != sandbox_text_only)
        atomic_store(&sandbox_base_load, base);
    lua_pop(L, 2);
    if (atomic_load(&sandbox_base_collectgarbage) == NULL || atomic_load(&sandbox_base_load) == NULL) {
        lua_pop(L, 1);
        return;
    }
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, sandbox_collectgarbage);
    lua_setfield(L, -2, "collectgarbage");
    lua_pushcfunction(L, sandbox_loader);
    lua_setfield(L, -2, "loader");
    lua_setfield(L, -2, "luaop.sandbox");
    lua_pop(L, 1);
}

void sandbox_apply(lua_State *L)
{
    int top = lua_gettop(L);

    sandbox_open(L);
    lua_getglobal(L, "os");
    sandbox_stub(L, lua_gettop(L), "execute", "os.execute");
    sandbox_stub(L, lua_gettop(L), "exit", "os.exit");
    lua_getglobal(L, "io");
    sandbox_stub(L, lua_gettop(L), "popen", "io.popen");
    lua_getglobal(L, "string");
    sandbox_stub(L, lua_gettop(L), "dump", "string.dump");
    lua_getglobal(L, "package");
    int pkg = lua_gettop(L);
    sandbox_stub(L, pkg, "loadlib", "package.loadlib");
    /* searchers: keep preload (1) and Lua files (2), drop C modules (3, 4) */
    lua_getfield(L, pkg, "searchers");
    lua_pushnil(L);
    lua_rawseti(L, -2, 4);
    lua_pushnil(L);
    lua_rawseti(L, -2, 3);
    lua_pop(L, 1);
    /* debug: gone from the globals and from require */
    lua_getfield(L, pkg, "loaded");
    lua_pushnil(L);
    lua_setfield(L, -2, "debug");
    lua_pop(L, 1);
    lua_pushnil(L);
    lua_setglobal(L, "debug");

    sandbox_wrap_load(L, "load", 3);
    sandbox_wrap_load(L, "loadfile", 2);
    lua_pushcfunction(L, sandbox_dofile);
    lua_setglobal(L, "dofile");
    lua_settop(L, top);
}
