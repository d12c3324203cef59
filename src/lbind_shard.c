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

static uint64_t lbind_shard_bound(lua_State *L, int t, const char *what, int i, lua_Integer k)
{
    int isint;
    lua_Integer v;

    lua_rawgeti(L, t, k);
    v = lua_tointegerx(L, -1, &isint);
    if (!isint)
        luaL_error(L, "%s: range %d needs two integers {lo, last}", what, i);
    lua_pop(L, 1);
    return (uint64_t)v;
}

/* The ranges of the table at idx, in a userdata pushed on the stack (the
 * collector frees it if this raises); *n their count. */
static shard_range *lbind_shard_ranges(lua_State *L, int idx, const char *what, size_t *n)
{
    lua_Integer len, i;
    shard_range *r;

    idx = lua_absindex(L, idx);
    luaL_checktype(L, idx, LUA_TTABLE);
    len = (lua_Integer)lua_rawlen(L, idx);
    if (len > SHARD_MAX_RANGES)
        luaL_error(L, "%s: %d ranges (at most %d)", what, (int)len, SHARD_MAX_RANGES);
    r = lua_newuserdatauv(L, (size_t)(len > 0 ? len : 1) * sizeof *r, 0);
    for (i = 1; i <= len; i++) {
        if (lua_rawgeti(L, idx, i) != LUA_TTABLE)
            luaL_error(L, "%s: range %d is not a table", what, (int)i);
        r[i - 1].lo = lbind_shard_bound(L, -1, what, (int)i, 1);
        r[i - 1].last = lbind_shard_bound(L, lua_gettop(L), what, (int)i, 2);
        lua_pop(L, 1);
        if (r[i - 1].lo > r[i - 1].last)
            luaL_error(L, "%s: range %d has lo past last", what, (int)i);
    }
    *n = (size_t)len;
    return r;
}

void lbind_shard_toset(lua_State *L, int idx, const char *what, shard_set *set)
{
    size_t n;
    shard_range *r = lbind_shard_ranges(L, idx, what, &n);

    if (shard_set_assign(set, r, n) != 0)
        luaL_error(L, "not enough memory");
    lua_pop(L, 1);
}

static int lbind_shard_fence(lua_State *L)
{
    api *a = runtime_of(L)->api;
    shard_range *r;
    size_t n;
    int rc;

    if (a == NULL)
        return luaL_error(L, "no API server is configured");
    r = lbind_shard_ranges(L, 1, "shard.fence", &n);
    rc = api_shard_fence(a, r, n);
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
