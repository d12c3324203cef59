/* lbind_shard.c - the Lua face of shard.c and of api.c's fence by range:
 * luaop.core.shard (luaop.shard's ring and membership use it).
 *
 *   shard.hash(s) -> the 64-bit FNV-1a hash of s, as a Lua integer (its
 *     bits: compare with math.ult), the API server's shardSelector hash
 *   shard.fence(ranges): from now on a write made for a key (from a task
 *     spawned with {shard = hash}, or one such a task spawned) leaves only
 *     while that hash is in one of ranges, a list of {lo, last} integer
 *     pairs (inclusive, unsigned bits); {} holds nothing (api.h) */
#include "lbind.h"

#include <stdlib.h>

#include <lauxlib.h>

#include "api.h"
#include "runtime.h"
#include "shard.h"

static int lbind_shard_hash(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);

    lua_pushinteger(L, (lua_Integer)shard_hash(s, len));
    return 1;
}

static uint64_t lbind_shard_bound(lua_State *L, int t, int i, lua_Integer k)
{
    int isint;
    lua_Integer v;

    lua_rawgeti(L, t, k);
    v = lua_tointegerx(L, -1, &isint);
    if (!isint)
        luaL_error(L, "shard.fence: range %d needs two integers {lo, last}", i);
    lua_pop(L, 1);
    return (uint64_t)v;
}

static int lbind_shard_fence(lua_State *L)
{
    api *a = runtime_of(L)->api;
    lua_Integer n, i;
    shard_range *r;
    int rc;

    if (a == NULL)
        return luaL_error(L, "no API server is configured");
    luaL_checktype(L, 1, LUA_TTABLE);
    n = (lua_Integer)lua_rawlen(L, 1);
    if (n > SHARD_MAX_RANGES)
        return luaL_error(L, "shard.fence: %d ranges (at most %d)", (int)n, SHARD_MAX_RANGES);
    r = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *r, 0); /* freed by the collector if we raise */
    for (i = 1; i <= n; i++) {
        if (lua_rawgeti(L, 1, i) != LUA_TTABLE)
            return luaL_error(L, "shard.fence: range %d is not a table", (int)i);
        r[i - 1].lo = lbind_shard_bound(L, -1, (int)i, 1);
        r[i - 1].last = lbind_shard_bound(L, lua_gettop(L), (int)i, 2);
        lua_pop(L, 1);
        if (r[i - 1].lo > r[i - 1].last)
            return luaL_error(L, "shard.fence: range %d has lo past last", (int)i);
    }
    rc = api_shard_fence(a, r, (size_t)n);
    lua_pop(L, 1);
    if (rc != 0)
        return luaL_error(L, "not enough memory");
    return 0;
}

static const luaL_Reg lbind_shard_funcs[] = {
    {"hash", lbind_shard_hash},
    {"fence", lbind_shard_fence},
    {NULL, NULL},
};

int lbind_shard_open(lua_State *L)
{
    luaL_newlib(L, lbind_shard_funcs);
    return 1;
}
