/* sandbox.c - what a luaop script may not do (see sandbox.h). */
#include "sandbox.h"

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

void sandbox_apply(lua_State *L)
{
    int top = lua_gettop(L);

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
