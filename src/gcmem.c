/* gcmem.c - see gcmem.h. */
#define _DEFAULT_SOURCE /* malloc_trim */
#include <malloc.h> /* glibc's; no #ifdef: a C library without it fails the build, not the trim */

#include <lauxlib.h>

#include "gcmem.h"

static const char GCMEM_SENTINEL[] = "luaop.gcmem.sentinel";
static unsigned long gcmem_cycle_count;

static void gcmem_arm(lua_State *L);

/* The end of a cycle: its garbage is freed, so its pages go back. A new
 * sentinel, unreachable too, for the next cycle (none during lua_close:
 * Lua finalizes nothing created then). */
static int gcmem_sentinel_gc(lua_State *L)
{
    gcmem_cycle_count++;
    malloc_trim(0);
    gcmem_arm(L);
    return 0;
}

static void gcmem_arm(lua_State *L)
{
    lua_newuserdatauv(L, 0, 0);
    if (luaL_newmetatable(L, GCMEM_SENTINEL)) {
        lua_pushcfunction(L, gcmem_sentinel_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    lua_pop(L, 1);
}

void gcmem_attach(lua_State *L)
{
    lua_gc(L, LUA_GCINC, GCMEM_PAUSE, 0, 0);
    gcmem_arm(L);
}

unsigned long gcmem_cycles(void)
{
    return gcmem_cycle_count;
}
